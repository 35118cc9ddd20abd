package names_test

import (
	"testing"

	"github.com/seckill/seckill-operator/workloads/names"
)

// Every workload runs side by side on one host with its defaults.
func TestDefaultPortsAreDistinct(t *testing.T) {
	seen := map[int]string{}
	for w, p := range names.DefaultPorts {
		if other, dup := seen[p]; dup {
			t.Fatalf("%s and %s both default to port %d", w, other, p)
		}
		seen[p] = w
	}
	for _, w := range []string{"gateway", "payments", "provider-sim", "consumer", "relay", "projector", "compensator", "scanner", "canceller"} {
		if names.DefaultPorts[w] == 0 {
			t.Errorf("%s has no default port", w)
		}
	}
}
