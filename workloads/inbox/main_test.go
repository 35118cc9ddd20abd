package inbox_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill/seckill-operator/internal/testenv"
)

// Every goroutine a test starts has ended when the package's tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
