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
	"strings"
	"testing"

	"github.com/seckill/seckill-operator/internal/testenv"
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

// TestBenchSaleRuns runs make bench-sale's whole sale, tiny: the workloads
// as processes, the open-loop load, the ceilings, the table and the plot.
func TestBenchSaleRuns(t *testing.T) {
	testenv.Get(t, "SECKILL_REDIS_ADDR")
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./hack/benchsale", "-runs", "1", "-requests", "600", "-rate", "200", "-stock", "60", "-retries", "3",
		"-evalsha-n", "500", "-pgbench-n", "64", "-out", out)
	cmd.Dir = root()
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench-sale: %v\n%s", err, b)
	}
	for _, want := range []string{"answered req/s ÷ EVALSHA ceiling", "orders/s ÷ pgbench ceiling", "reservation → order p99 (ms)", "final answer QUEUED"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("bench-sale printed no %q:\n%s", want, b)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "sale.png")); err != nil || st.Size() == 0 {
		t.Fatalf("bench-sale wrote no plot: %v", err)
	}
	t.Logf("%s", b)
}
