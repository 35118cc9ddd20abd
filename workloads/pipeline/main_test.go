package pipeline_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill-operator/internal/testenv"
)

// Every goroutine a test starts (workers, receive loops, relays) has ended
// when the package's tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
