package stackenv

import (
	"os"
	"path/filepath"
	"testing"
)

// hack/*.sh source the env file, so a value with a shell character (a DSN's
// '&') is single-quoted there; the Go side reads the value without quotes.
func TestQuotedValuesAreUnquoted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(p, []byte("# c\nA='x?a=1&b=/c'\nB=plain\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SECKILL_STACK_ENV", p)
	for k, want := range map[string]string{"A": "x?a=1&b=/c", "B": "plain"} {
		if got, err := Lookup(k); err != nil || got != want {
			t.Errorf("Lookup(%s) = %q, %v; want %q", k, got, err, want)
		}
	}
}
