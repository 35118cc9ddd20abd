package pipeline

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/logs/logstest"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
)

// The topic and group of these tests alone (hack/rocketmq/resources.txt).
const drainTopic, drainGroup = "seckill-test-drain", "seckill-test-drain"

// SIGTERM in the middle of a received batch: the batch is finished with a
// live context (every delivery committed and acknowledged), the loop then
// returns, and nothing of it is delivered again. When the work outlasts the
// grace, what is left is handed back and redelivered within seconds, not
// after the 30 s invisibility.
func TestShutdownMidBatch(t *testing.T) {
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	prod, err := mq.NewProducer(endpoint, drainTopic)
	require.NoError(t, err)
	t.Cleanup(func() { _ = prod.Close() })
	var logBuf logstest.Capture
	log := slog.New(slog.NewTextHandler(&logBuf, nil))

	// run starts a consumer loop and returns what its handler saw in the
	// batch during which shutdown began.
	type seen struct {
		mu             sync.Mutex
		handled, acked []string
		liveCtx        bool
	}
	run := func(t *testing.T, tag string, slow time.Duration) (*seen, []string) {
		sent := map[string]bool{}
		for range 8 {
			id := ids.NewRandom().String()
			_, err := prod.Send(context.Background(), mq.Message{Topic: drainTopic, MessageID: id, Key: id, Body: []byte(tag + id)})
			require.NoError(t, err)
			sent[id] = true
		}
		c, err := mq.NewConsumer(endpoint, drainGroup, drainTopic)
		require.NoError(t, err)
		defer func() { _ = c.Close() }()
		ctx, sigterm := context.WithCancel(context.Background())
		defer sigterm()
		s := &seen{liveCtx: true}
		handle := func(hctx context.Context, d mq.Delivery) {
			body := string(d.Body)
			if !strings.HasPrefix(body, tag) {
				_ = c.Ack(hctx, d) // an earlier run's leftover
				return
			}
			sigterm() // shutdown begins while this batch is in hand
			time.Sleep(slow)
			s.mu.Lock()
			defer s.mu.Unlock()
			if hctx.Err() != nil {
				s.liveCtx = false
				return
			}
			s.handled = append(s.handled, strings.TrimPrefix(body, tag))
			if c.Ack(hctx, d) == nil {
				s.acked = append(s.acked, strings.TrimPrefix(body, tag))
			}
		}
		done := make(chan struct{})
		go func() { defer close(done); receiveLoop(ctx, c, 30*time.Second, &metrics.Health{}, log, handle) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the loop did not return after shutdown")
		}
		var rest []string
		for id := range sent {
			rest = append(rest, id)
		}
		return s, rest
	}
	// redelivered receives from the group for a while and returns the ids
	// of this run's messages that came (acknowledging them).
	redelivered := func(t *testing.T, tag string, within time.Duration) map[string]bool {
		c, err := mq.NewConsumer(endpoint, drainGroup, drainTopic)
		require.NoError(t, err)
		defer func() { _ = c.Close() }()
		got := map[string]bool{}
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			ds, err := c.Receive(context.Background(), 16, 30*time.Second)
			if err != nil {
				continue
			}
			for _, d := range ds {
				if body := string(d.Body); strings.HasPrefix(body, tag) {
					got[strings.TrimPrefix(body, tag)] = true
				}
				_ = c.Ack(context.Background(), d)
			}
		}
		return got
	}

	t.Run("the batch is finished", func(t *testing.T) {
		tag := "finish-" + ids.NewRandom().String() + ":"
		s, _ := run(t, tag, 50*time.Millisecond)
		require.True(t, s.liveCtx, "every delivery of the batch was handled with a live context")
		require.NotEmpty(t, s.handled)
		require.Equal(t, s.handled, s.acked, "and acknowledged")
		again := redelivered(t, tag, 8*time.Second)
		for _, id := range s.acked {
			require.False(t, again[id], "an acknowledged delivery came again: %s", id)
		}
		t.Logf("batch of %d finished after shutdown began; %d of the run's other messages went to the next consumer", len(s.acked), len(again))
	})

	t.Run("what outlasts the grace is handed back", func(t *testing.T) {
		prev := drainGrace
		drainGrace = 300 * time.Millisecond
		t.Cleanup(func() { drainGrace = prev })
		tag := "handback-" + ids.NewRandom().String() + ":"
		s, sent := run(t, tag, 500*time.Millisecond)
		require.False(t, s.liveCtx, "the delivery that outlasted the grace saw its context end")
		start := time.Now()
		again := redelivered(t, tag, 12*time.Second)
		// The slow delivery stays invisible (its context ended before its
		// ack); the rest of its batch was handed back, and with the run's
		// other messages it is delivered again well before the 30 s
		// invisibility.
		require.Contains(t, logBuf.String(), "handed deliveries back")
		require.Len(t, s.handled, 0)
		require.Len(t, again, len(sent)-1, "all but the slow one redelivered within %s", time.Since(start).Round(time.Second))
	})
}
