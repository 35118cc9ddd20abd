package dlq_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/dlq"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/pipeline"
)

// The poison topic and group (retry 1: two deliveries) and the test
// replayer group (retry 32) exist only for this test (hack/stack.sh).
const (
	topic    = "seckill-test-poison"
	group    = "seckill-test-poison"
	replayer = "seckill-test-replayer"
)

// An order-create message fails every delivery the group allows (the order
// transaction aborts after its inbox insert, as when PostgreSQL keeps
// failing): the consumer counts it as dead-lettered and the broker moves it
// to %DLQ%<group>. Once the cause is gone, Replay sends it back with its
// original message id and the order is created once; a second replay of the
// same message (a lost DLQ ack) changes nothing.
func TestDeadLetteredOrderIsReplayedOnce(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	pool := testenv.Database(t)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, 1, 5, 5)`, activity)
	require.NoError(t, err)

	producer, err := mq.NewProducer(endpoint, topic)
	require.NoError(t, err)
	defer producer.Close()
	rid := ids.NewRandom()
	now := time.Now().UnixMilli()
	msg := events.NewOrderCreateRequested(rid, ids.NewRandom(), ids.NewRandom(), activity, 1, 7, -1, now, now+600_000, "dlq-test")
	body, err := msg.Marshal()
	require.NoError(t, err)
	_, err = producer.Send(ctx, mq.Message{Topic: topic, MessageID: msg.MessageID.String(), Key: rid.String(),
		Tag: events.TypeOrderCreateRequested, Body: body})
	require.NoError(t, err)

	// A consumer whose transaction always fails.
	m := metrics.NewConsumer(prometheus.NewRegistry(), group)
	failing := runConsumer(t, endpoint, pool, log, m, func(string) error { return errors.New("PostgreSQL keeps failing") })
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.DeadLettered) == 1 }, 60*time.Second, 100*time.Millisecond,
		"the last failed attempt is counted")
	failing()
	require.Equal(t, float64(2), testutil.ToFloat64(m.Consumed.WithLabelValues("RETRY")), "two deliveries, then no more")

	// The cause is fixed; the healthy consumer's next poll moves the message
	// to the DLQ (it is past the limit), so nothing is created yet.
	healthyMetrics := metrics.NewConsumer(prometheus.NewRegistry(), group)
	healthy := runConsumer(t, endpoint, pool, log, healthyMetrics, nil)
	defer healthy()
	orders := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE reservation_id = $1`, rid).Scan(&n))
		return n
	}
	time.Sleep(3 * time.Second)
	require.Zero(t, orders())

	replayed := prometheus.NewCounter(prometheus.CounterOpts{Name: "dlq_replayed_total"})
	replay := func(idle time.Duration) (dlq.Report, error) {
		from, err := mq.NewConsumer(endpoint, replayer, names.DLQTopic(group))
		if mq.IsTopicNotFound(err) {
			return dlq.Report{}, nil // nothing dead-lettered yet
		}
		if err != nil {
			return dlq.Report{}, err
		}
		defer from.Close()
		r := &dlq.Replayer{DLQ: from, To: producer, Topic: topic, Log: log, Replayed: replayed,
			Only: func(d mq.Delivery) bool { return d.MessageID == msg.MessageID.String() }}
		return r.Replay(ctx, 0, idle)
	}
	var rep dlq.Report
	deadline := time.Now().Add(90 * time.Second)
	for len(rep.Replayed) == 0 && time.Now().Before(deadline) {
		rep, err = replay(10 * time.Second)
		require.NoError(t, err)
	}
	require.Equal(t, []string{msg.MessageID.String()}, rep.Replayed)
	require.Equal(t, float64(1), testutil.ToFloat64(replayed))
	require.Eventually(t, func() bool { return orders() == 1 }, 60*time.Second, 200*time.Millisecond)

	// The same message again (as if the DLQ ack had been lost): the inbox
	// answers it, nothing changes.
	_, err = producer.Send(ctx, mq.Message{Topic: topic, MessageID: msg.MessageID.String(), Key: rid.String(),
		Tag: events.TypeOrderCreateRequested, Body: body, Properties: map[string]string{dlq.PropReplayedFrom: names.DLQTopic(group)}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return testutil.ToFloat64(healthyMetrics.Duplicates) >= 1 }, 60*time.Second, 200*time.Millisecond)
	var inbox, ledger, occupied int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM consumer_inbox WHERE message_id = $1),
		(SELECT count(*) FROM inventory_ledger WHERE reservation_id = $2),
		(SELECT occupied_stock FROM sku_inventory WHERE activity_id = $3)`, msg.MessageID, rid, activity).Scan(&inbox, &ledger, &occupied))
	require.Equal(t, []int{1, 1, 1, 1}, []int{orders(), inbox, ledger, occupied})
	rep, err = replay(3 * time.Second)
	require.NoError(t, err)
	require.Empty(t, rep.Replayed, "nothing of ours left in the DLQ")
}

// runConsumer runs an order consumer of the poison group until the returned
// stop is called.
func runConsumer(t *testing.T, endpoint string, pool *pgxpool.Pool, log *slog.Logger, m *metrics.Consumer, fp func(string) error) (stop func()) {
	t.Helper()
	c, err := mq.NewConsumer(endpoint, group, topic)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	oc := &pipeline.OrderConsumer{MQ: c, Invisible: 2 * time.Second, Log: log, MaxAttempts: 2, Metrics: m,
		Store: &orderstore.Consumer{Pool: pool, Group: group, PaymentWindow: time.Minute,
			EventsTopic: "seckill-test-order-events", Failpoint: fp}}
	done := make(chan struct{})
	go func() { _ = oc.Run(ctx); close(done) }()
	return func() { cancel(); <-done; _ = c.Close() }
}
