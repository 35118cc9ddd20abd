package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		attempt  int
		low, top time.Duration
	}{{0, 160 * time.Millisecond, 240 * time.Millisecond}, {1, 160 * time.Millisecond, 240 * time.Millisecond},
		{3, 640 * time.Millisecond, 960 * time.Millisecond}, {30, 48 * time.Second, 72 * time.Second}} {
		d := Backoff(c.attempt)
		require.GreaterOrEqual(t, d, c.low, "attempt %d", c.attempt)
		require.LessOrEqual(t, d, c.top, "attempt %d", c.attempt)
	}
}
