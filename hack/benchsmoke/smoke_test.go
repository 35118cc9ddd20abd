// Package benchsmoke runs the benchmarks of hack/ with tiny counts in make
// test, so that a change to a script's KEYS, a statement or a benchmark's
// name breaks a test instead of rotting until someone runs make bench. The
// figures of a smoke run mean nothing; the full runs are make bench.
package benchsmoke

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/seckill/seckill-operator/workloads/testenv"
)

func root() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

var ratio = regexp.MustCompile(`ratio +[0-9]+% of the ceiling`)

func TestBenchmarksRun(t *testing.T) {
	testenv.Get(t, "SECKILL_REDIS_ADDR") // the stack is up
	for _, tc := range []struct{ script, n string }{
		{"bench-reserve.sh", "500"},
		{"bench-order.sh", "128"},
	} {
		t.Run(tc.script, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(root(), "hack", tc.script))
			cmd.Env = append(os.Environ(), "RUNS=1", "N="+tc.n)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.script, err, out)
			}
			if !ratio.Match(out) {
				t.Fatalf("%s printed no ratio to its ceiling:\n%s", tc.script, out)
			}
			t.Logf("%s", out)
		})
	}
}
