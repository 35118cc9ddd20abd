package mq

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
)

// A proxy whose polling floor is above the 1 s await refuses every receive
// with ILLEGAL_POLLING_TIME: the consumer then polls as long as such a
// proxy asks (5 s) on a fresh client, and receives again.
func TestReceiveAwaitFallsBackForAProxyWithTheDefaultFloor(t *testing.T) {
	c, err := NewConsumer(testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), "seckill-bench-latency", "seckill-bench-latency")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Equal(t, ReceiveAwait, c.Await())
	start := time.Now()
	_, err = c.Receive(context.Background(), 1, 10*time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 4*time.Second, "an empty poll ends after about the 1 s await (the stack's proxy allows it)")

	old := c.client()
	c.failed(&rmq.ErrRpcStatus{Code: int32(v2.Code_ILLEGAL_POLLING_TIME), Message: "The deadline time remaining is not enough for polling"})
	require.Equal(t, fallbackAwait, c.Await())
	require.NotSame(t, old, c.client(), "a fresh client with the longer await")
	_, err = c.Receive(context.Background(), 1, 10*time.Second)
	require.NoError(t, err, "and it receives")
}

// A client library stop that never returns does not hold the process: Close
// gives up after its bound; one that returns passes its error on.
func TestStopWithinBoundsAHangingStop(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	start := time.Now()
	err := stopWithin(func() error { <-hang; return nil }, 50*time.Millisecond)
	require.ErrorContains(t, err, "still waiting after 50ms")
	require.Less(t, time.Since(start), 2*time.Second)

	require.NoError(t, stopWithin(func() error { return nil }, time.Second))
	require.EqualError(t, stopWithin(func() error { return context.Canceled }, time.Second), context.Canceled.Error())
}
