package gateway_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/mq"
)

// gatedSender holds every send until the gate opens, then sends it on the
// real broker.
type gatedSender struct {
	gate    chan struct{}
	started atomic.Int32
	real    gateway.Sender
}

func newGatedSender(t *testing.T) *gatedSender {
	p, err := mq.NewProducer(testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), "seckill-test-normal")
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return &gatedSender{gate: make(chan struct{}), real: p}
}

func (g *gatedSender) Send(ctx context.Context, m mq.Message) (string, error) {
	g.started.Add(1)
	<-g.gate
	return g.real.Send(ctx, m)
}

func (f *fixture) mqState(t *testing.T, rid string) string {
	t.Helper()
	h, err := f.rs.Reservation(context.Background(), f.slot, uuid.MustParse(rid))
	require.NoError(t, err)
	return h["mq_state"]
}

func async(workers, queue int) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.SendWorkers, c.SendQueue = workers, queue
		c.SendTimeout = 10 * time.Second
	}
}

// With send workers the answer does not wait for the broker: QUEUED while
// the send is held, the reservation waiting in send_due; the message is
// sent and acked after.
func TestAsyncSendAnswersBeforeTheBroker(t *testing.T) {
	sender := newGatedSender(t)
	f := newFixture(t, 10, sender, async(2, 0))
	r := f.post(t, f.path(), bearer(501), body(ids.NewRandom()))
	require.Equal(t, gateway.CodeQueued, r.Code)
	require.Equal(t, http.StatusAccepted, r.status)
	require.Equal(t, "PENDING", f.mqState(t, r.RID), "answered before the send")
	require.Eventually(t, func() bool { return sender.started.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
	close(sender.gate)
	require.Eventually(t, func() bool { return f.mqState(t, r.RID) == "PUBLISHED" }, 10*time.Second, 20*time.Millisecond)
	n, err := f.rdb.ZCard(context.Background(), f.slot.SendDue()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the send was acked")
}

// A full queue never drops a send: the request sends it itself and
// answers after.
func TestAsyncSendFullQueueSendsInTheRequest(t *testing.T) {
	sender := newGatedSender(t)
	f := newFixture(t, 10, sender, async(1, 1))
	// The worker holds the first, the queue the second.
	for u := range 2 {
		require.Equal(t, gateway.CodeQueued, f.post(t, f.path(), bearer(int64(600+u)), body(ids.NewRandom())).Code)
	}
	require.Eventually(t, func() bool { return sender.started.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
	answered := make(chan reply, 1)
	go func() { answered <- f.post(t, f.path(), bearer(700), body(ids.NewRandom())) }()
	select {
	case r := <-answered:
		t.Fatalf("a request with the queue full answered before its send: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	close(sender.gate)
	r := <-answered
	require.Equal(t, gateway.CodeQueued, r.Code)
	require.Equal(t, "PUBLISHED", f.mqState(t, r.RID), "sent in the request, before the answer")
	require.Eventually(t, func() bool {
		n, err := f.rdb.ZCard(context.Background(), f.slot.SendDue()).Result()
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "every send acked")
}

// Close (after the HTTP server stopped) returns once every queued
// reservation is sent.
func TestCloseSendsWhatIsQueued(t *testing.T) {
	sender := newGatedSender(t)
	f := newFixture(t, 10, sender, async(1, 16))
	rids := make([]string, 5)
	for u := range rids {
		r := f.post(t, f.path(), bearer(int64(800+u)), body(ids.NewRandom()))
		require.Equal(t, gateway.CodeQueued, r.Code)
		rids[u] = r.RID
	}
	f.srv.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		close(sender.gate)
	}()
	f.g.Close()
	for _, rid := range rids {
		require.Equal(t, "PUBLISHED", f.mqState(t, rid), "sent before Close returned")
	}
}
