package pipeline_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	ordercancel "github.com/seckill/seckill-operator/workloads/cancel"
	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/logs/logstest"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/pipeline"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

const (
	topicCreate = "seckill-test-order-create"
	topicEvents = "seckill-test-order-events"
	topicCancel = "seckill-test-delay"
	sku         = int64(5)
	buckets     = 3
)

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

type harness struct {
	ctx      context.Context
	pool     *pgxpool.Pool
	rs       *redisstore.Store
	ring     *ids.Keyring
	producer *mq.Producer
	activity int64
	// the workers' metrics (the first consumer's, the first relay's)
	consumerMetrics *metrics.Consumer
	relayMetrics    *metrics.Relay
	// logs is what every worker logged: JSON lines at debug (package logs).
	logs *logstest.Capture
}

// events are the §12.1 event names the workers have logged so far; every
// line must be one JSON object carrying the workload and the activity.
func (h *harness) events(t *testing.T) map[string]int {
	t.Helper()
	lines := h.logs.Lines(t)
	for _, l := range lines {
		require.Equal(t, "pipeline-test", l[logs.Workload], "%v", l)
		require.InDelta(t, h.activity, l[logs.ActivityID], 0, "%v", l)
	}
	return logstest.Events(lines)
}

// start provisions a SKU (PostgreSQL and Redis buckets) and runs every worker
// of the pipeline in-process against the real servers until the test ends.
func start(t *testing.T, pgStock, redisStock int) *harness {
	t.Helper()
	return startWith(t, pgStock, redisStock, 15*time.Minute, nil)
}

// startWith is start with the orders' payment window and, when channel is
// set, a timeout canceller asking it.
func startWith(t *testing.T, pgStock, redisStock int, paymentWindow time.Duration, channel provider.Channel) *harness {
	t.Helper()
	return startOn(t, testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), pgStock, redisStock, paymentWindow, channel)
}

// startOn is startWith on the broker at endpoint.
func startOn(t *testing.T, endpoint string, pgStock, redisStock int, paymentWindow time.Duration, channel provider.Channel, tune ...func(*pipeline.Canceller)) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool := testenv.Database(t)
	rdb := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(ctx, rdb))
	rs := redisstore.New(rdb)
	ring, _ := ids.NewKeyring(1, map[byte][]byte{1: []byte("pipeline-test-key-0123456789abcdef")})
	activity := time.Now().UnixNano() % 1_000_000_000_000
	logged := &logstest.Capture{}
	log := logs.New(logged, "pipeline-test", logs.Options{Level: slog.LevelDebug, ActivityID: activity})
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock, price_cents) VALUES ($1, $2, $3, $3, 100)`, activity, sku, pgStock)
	require.NoError(t, err)
	slots := redisstore.Slots(activity, sku, buckets)
	for _, sl := range slots {
		_, _, err := rs.Provision(ctx, sl, int64(redisStock/buckets), 1)
		require.NoError(t, err)
		require.NoError(t, rs.SetWindow(ctx, sl, redisstore.WindowActive))
	}
	producer, err := mq.NewProducer(endpoint, topicCreate, topicEvents, topicCancel)
	require.NoError(t, err)
	orderMQ, err := mq.NewConsumer(endpoint, "seckill-test-consumer", topicCreate)
	require.NoError(t, err)
	projMQ, err := mq.NewConsumer(endpoint, "seckill-test-projector", topicEvents)
	require.NoError(t, err)

	consumerMetrics := metrics.NewConsumer(prometheus.NewRegistry(), "seckill-test-consumer")
	relayMetrics := metrics.NewRelay(prometheus.NewRegistry())
	workers := []interface{ Run(context.Context) error }{
		&pipeline.OrderConsumer{MQ: orderMQ, Invisible: 10 * time.Second, Log: log, Metrics: consumerMetrics,
			ID: "consumer-1", ActivityID: activity, HeartbeatEvery: 200 * time.Millisecond,
			Store: &orderstore.Consumer{Pool: pool, Group: "seckill-test-consumer", PaymentWindow: paymentWindow, EventsTopic: topicEvents, CancelTopic: topicCancel}},
		&pipeline.Relay{Producer: producer, Batch: 32, Log: log, Metrics: relayMetrics,
			Store: &outbox.Store{Pool: pool, Owner: "relay-1", Lease: 30 * time.Second, MaxAttempts: 10}},
		&pipeline.Relay{Producer: producer, Batch: 32, Log: log,
			Store: &outbox.Store{Pool: pool, Owner: "relay-2", Lease: 30 * time.Second, MaxAttempts: 10}},
		&pipeline.Projector{MQ: projMQ, Redis: rs, Pool: pool, Group: "seckill-test-projector", Invisible: 10 * time.Second, Log: log},
		&pipeline.Compensator{Batch: 16, Log: log, Worker: &compensation.Worker{Pool: pool, Redis: rs, Owner: "comp-1",
			Lease: 30 * time.Second, MaxAttempts: 10, TerminalTTL: time.Hour}},
		&pipeline.SendScanner{Redis: rs, Producer: producer, Topic: topicCreate, Slots: slots, Lease: 5 * time.Second, Batch: 32, Log: log},
		&pipeline.SendScanner{Redis: rs, Producer: producer, Topic: topicCreate, Slots: slots, Lease: 5 * time.Second, Batch: 32, Log: log},
	}
	var closeCancel func() error
	if channel != nil {
		cancelMQ, err := mq.NewConsumer(endpoint, "seckill-test-canceller", topicCancel)
		require.NoError(t, err)
		closeCancel = cancelMQ.Close
		cw := &pipeline.Canceller{MQ: cancelMQ, Group: "seckill-test-canceller", Invisible: 10 * time.Second, Log: log,
			Cancel: &ordercancel.Canceller{Pool: pool, Channel: channel, Payments: &payment.Store{Pool: pool, EventsTopic: topicEvents}, EventsTopic: topicEvents}}
		for _, f := range tune {
			f(cw)
		}
		workers = append(workers, cw)
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = orderMQ.Close()
		_ = projMQ.Close()
		if closeCancel != nil {
			_ = closeCancel()
		}
		_ = producer.Close()
	})
	return &harness{ctx: ctx, pool: pool, rs: rs, ring: ring, producer: producer, activity: activity, logs: logged,
		consumerMetrics: consumerMetrics, relayMetrics: relayMetrics}
}

// reserve runs the reserve script for a new request of user; send says
// whether the "gateway" sends at once and, ack, whether it records the send;
// retries replays the same request that many more times (client retries).
func (h *harness) reserve(t *testing.T, user int64, send, ack bool, retries ...int) (redisstore.ReserveRequest, bool) {
	t.Helper()
	sl := redisstore.BucketSlot(h.activity, sku, int(user)%buckets)
	req := ids.NewRandom()
	rid := h.ring.ReservationID(ids.ReservationKey{ActivityID: h.activity, SKUID: sku, UserID: user, RequestID: req})
	mid, _ := h.ring.MessageID(rid, 1)
	now := time.UnixMilli(time.Now().UnixMilli())
	r := redisstore.ReserveRequest{Slot: sl, ReservationID: rid, MessageID: mid, RequestID: req, UserID: user,
		Now: now, BusinessDeadline: now.Add(5 * time.Minute), SendDue: now.Add(2 * time.Second),
		RequestTTL: time.Minute, SchemaVersion: 1, KeyVersion: 1, TraceID: "t"}
	res, err := h.rs.Reserve(h.ctx, r)
	require.NoError(t, err)
	for _, n := range retries {
		for range n {
			again, err := h.rs.Reserve(h.ctx, r)
			require.NoError(t, err)
			if res.Code == redisstore.ReserveOK {
				require.Equal(t, int64(redisstore.ReserveReplayed), again.Code, "a retry is answered by the original reservation")
			}
		}
	}
	if res.Code != redisstore.ReserveOK {
		return r, false
	}
	if send {
		body, _ := events.NewOrderCreateRequested(rid, mid, req, h.activity, sku, user, sl.Bucket,
			now.UnixMilli(), r.BusinessDeadline.UnixMilli(), "t").Marshal()
		sctx, cancel := context.WithTimeout(h.ctx, 2*time.Second) // as the gateway's send timeout
		_, err := h.producer.Send(sctx, mq.Message{Topic: topicCreate, MessageID: mid.String(), Key: rid.String(),
			Tag: events.TypeOrderCreateRequested, Body: body})
		cancel()
		if err == nil && ack {
			_, _ = h.rs.AckSend(h.ctx, sl, rid, r.SendDue.UnixMilli(), time.Now(), 0)
		}
	}
	return r, true
}

func (h *harness) counters(t *testing.T) redisstore.Counters {
	t.Helper()
	var c redisstore.Counters
	for _, sl := range redisstore.Slots(h.activity, sku, buckets) {
		x, err := h.rs.ReadCounters(h.ctx, sl)
		require.NoError(t, err)
		c = c.Add(x)
	}
	return c
}

// checkInvariants asserts the sale's orders and, once it has converged,
// every invariant (package invariants).
func (h *harness) checkInvariants(t *testing.T, orders int) {
	t.Helper()
	require.Equal(t, orders, count(t, h.pool, `SELECT count(*) FROM orders WHERE activity_id = $1`, h.activity))
	r, err := invariants.Await(h.ctx, invariants.Sources{Pool: h.pool, Redis: h.rs}, h.activity,
		[]invariants.SKU{{ID: sku, Buckets: buckets}}, invariants.Expect{Settled: true}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, r.OK(), r.String())
}

// A whole sale through the real pipeline: Redis holds more stock (30) than
// PostgreSQL (25), 100 buyers with client retries; every accepted reservation
// ends ORDER_CREATED or COMPENSATED, and the invariants hold.
func TestWholeSaleThroughThePipeline(t *testing.T) {
	const pgStock, redisStock, buyers = 25, 30, 100
	h := start(t, pgStock, redisStock)
	ctx, pool, rs, producer, activity := h.ctx, h.pool, h.rs, h.producer, h.activity

	// The buyers: reserve (every third retries its request), send at once with the fixed id.
	var mu sync.Mutex
	accepted := map[string]bool{}
	var bwg sync.WaitGroup
	for u := range buyers {
		bwg.Add(1)
		go func(user int64) {
			defer bwg.Done()
			r, ok := h.reserve(t, user, true, true, int(user%3/2))
			if ok {
				mu.Lock()
				accepted[r.ReservationID.String()] = true
				mu.Unlock()
			}
		}(int64(1000 + u))
	}
	bwg.Wait()
	require.Len(t, accepted, redisStock, "Redis admits exactly its stock")

	// A malformed message on the topic is quarantined, and the consumer keeps going.
	_, err := producer.Send(ctx, mq.Message{Topic: topicCreate, MessageID: ids.NewRandom().String(), Body: []byte(`{"schema_version":9}`)})
	require.NoError(t, err)

	// Convergence: every accepted reservation reached a terminal state.
	require.Eventually(t, func() bool {
		var c redisstore.Counters
		for _, sl := range redisstore.Slots(activity, sku, buckets) {
			x, err := rs.ReadCounters(ctx, sl)
			if err != nil {
				return false
			}
			c = c.Add(x)
		}
		return count(t, pool, `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status IN ('ORDER_CREATED', 'COMPENSATED')`, activity) == redisStock &&
			c.OpenReserved == 0 && c.Committed == pgStock &&
			count(t, pool, `SELECT count(*) FROM message_quarantine WHERE reason_code = 'UNKNOWN_SCHEMA'`) >= 1
	}, 120*time.Second, 200*time.Millisecond)

	// Invariants: exactly the PostgreSQL stock is sold, the rest compensated once.
	h.checkInvariants(t, pgStock)
	require.Equal(t, redisStock-pgStock, count(t, pool, `SELECT count(*) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id) WHERE r.activity_id = $1 AND t.status = 'APPLIED'`, activity))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM event_outbox WHERE status <> 'SENT'`))
	require.Eventually(t, func() bool {
		return count(t, pool, `SELECT count(*) FROM consumer_heartbeat WHERE consumer_id = 'consumer-1' AND commits_total >= $1`, redisStock) == 1
	}, 5*time.Second, 100*time.Millisecond, "the consumer reports its commits for the operator's scaling")
	total := h.counters(t)
	require.Equal(t, int64(redisStock-pgStock), total.Available, "the compensated units are sellable in Redis again")
	require.Equal(t, uint64(pgStock), samples(t, h.consumerMetrics.ToOrder), "reservation → order observed once per order")
	require.Positive(t, samples(t, h.relayMetrics.Attempts), "the relay's attempts per sent event")
	seen := h.events(t)
	for _, e := range []string{logs.EventOrderTransactionCommitted, logs.EventOutboxClaimed, logs.EventCompensationAuthorized, logs.EventCompensationRedisApplied} {
		require.Positive(t, seen[e], "the sale logged %s: %v", e, seen)
	}
	require.Equal(t, redisStock, seen[logs.EventOrderTransactionCommitted], "one committed line per order and per rejection: %v", seen)
}

// samples is how many observations a histogram holds.
func samples(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, h.Write(&m))
	return m.GetHistogram().GetSampleCount()
}

// design.md#failpoints after_redis_reserve and after_mq_send_before_redis_mark: the
// gateway died after the Lua (nothing sent) or after the broker accepted the
// message but before send_due was acked. The scanner resends with the same
// message id; the inbox turns the duplicate into the recorded outcome.
func TestScannerRecoversGatewayCrashes(t *testing.T) {
	h := start(t, 100, 99)
	for u := range 10 {
		_, ok := h.reserve(t, int64(5000+u), false, false) // crashed before the send
		require.True(t, ok)
	}
	for u := range 10 {
		_, ok := h.reserve(t, int64(6000+u), true, false) // crashed after the send
		require.True(t, ok)
	}
	require.Eventually(t, func() bool {
		c := h.counters(t)
		return c.OpenReserved == 0 && c.Committed == 20
	}, 90*time.Second, 200*time.Millisecond)
	h.checkInvariants(t, 20)
	require.Equal(t, 20, count(t, h.pool, `SELECT count(*) FROM consumer_inbox WHERE consumer_group = 'seckill-test-consumer' AND reservation_id IN (SELECT reservation_id FROM inventory_reservation WHERE activity_id = $1)`, h.activity))
	require.Zero(t, count(t, h.pool, `SELECT count(*) FROM message_quarantine WHERE reason_code = 'CONFLICT'`), "a resend is byte-identical: no payload conflict")
	for _, sl := range redisstore.Slots(h.activity, sku, buckets) {
		n, err := h.rs.Client().ZCard(h.ctx, sl.SendDue()).Result()
		require.NoError(t, err)
		require.Zero(t, n, "nothing left to send")
	}
	seen := h.events(t)
	// The ten never sent are claimed by the scanner (the ten sent are
	// settled by their order before their resend falls due).
	require.GreaterOrEqual(t, seen[logs.EventReservationResendClaimed], 10, "every send claimed is logged: %v", seen)
}

// Bad messages on the order-create topic — not JSON, oversized, an unknown
// schema, are each quarantined with
// their bytes and a reason, acknowledged (never retried forever), and the
// consumer goes on to create the order of the good message behind them.
func TestBadMessagesAreQuarantinedAndTheConsumerKeepsGoing(t *testing.T) {
	h := start(t, 5, 3)
	bad := map[string][]byte{
		events.ReasonMalformed:     []byte(`{"event_type": "ORDER_CREATE_REQUESTED", `),
		events.ReasonOversized:     []byte(`{"pad":"` + strings.Repeat("x", events.MaxMessageBytes) + `"}`),
		events.ReasonUnknownSchema: []byte(`{"schema_version":7,"event_type":"ORDER_CREATE_REQUESTED"}`),
	}
	for _, body := range bad {
		_, err := h.producer.Send(h.ctx, mq.Message{Topic: topicCreate, MessageID: ids.NewRandom().String(), Body: body})
		require.NoError(t, err)
	}
	r, ok := h.reserve(t, 4242, true, true)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		return count(t, h.pool, `SELECT count(*) FROM orders WHERE reservation_id = $1`, r.ReservationID) == 1
	}, 60*time.Second, 200*time.Millisecond, "the good message behind the bad ones makes its order")
	for reason, body := range bad {
		require.Eventually(t, func() bool {
			var got []byte
			err := h.pool.QueryRow(h.ctx, `SELECT payload FROM message_quarantine WHERE reason_code = $1 AND payload_hash = sha256($2)`,
				reason, body).Scan(&got)
			return err == nil && bytes.Equal(got, body)
		}, 30*time.Second, 200*time.Millisecond, "%s kept byte for byte", reason)
	}
	// Not retried: each is quarantined once.
	time.Sleep(2 * time.Second)
	for reason, body := range bad {
		require.Equal(t, 1, count(t, h.pool, `SELECT count(*) FROM message_quarantine WHERE payload_hash = sha256($1)`, body), reason)
	}
}

// Orders that are not paid are cancelled by their timers through the whole
// pipeline: the order transaction writes the delayed timer, the relay sends
// it, the canceller cancels (releasing PostgreSQL stock), the projector
// releases Redis once. Paid orders stay paid and sold.
// conflicting is a channel that, for one order, reports a success under a
// transaction id another order's payment already holds.
type conflicting struct {
	*provider.Sim
	mu     sync.Mutex
	pool   *pgxpool.Pool
	res    uuid.UUID // the reservation whose order gets the conflicting answer
	stolen string
}

func (c *conflicting) Close(ctx context.Context, order uuid.UUID) (*provider.Paid, error) {
	c.mu.Lock()
	res, txn := c.res, c.stolen
	c.mu.Unlock()
	var rid uuid.UUID
	if txn != "" && c.pool.QueryRow(ctx, `SELECT reservation_id FROM orders WHERE order_id = $1`, order).Scan(&rid) == nil && rid == res {
		return &provider.Paid{TransactionID: txn, AmountCents: 100, Currency: "CNY", At: time.Now()}, nil
	}
	return c.Sim.Close(ctx, order)
}

func TestUnpaidOrdersAreCancelledThroughThePipeline(t *testing.T) {
	sim := &provider.Sim{ProviderName: "sim"}
	channel := &conflicting{Sim: sim}
	h := startWith(t, 10, 9, 5*time.Second, channel)
	payments := &payment.Store{Pool: h.pool, EventsTopic: topicEvents}
	sim.Deliver = func(ctx context.Context, order uuid.UUID, p provider.Paid) error {
		_, err := payments.Apply(ctx, payment.Callback{Provider: "sim", TransactionID: p.TransactionID, OrderID: order, AmountCents: p.AmountCents, Currency: p.Currency, PaidAt: p.At})
		return err
	}
	var rids []uuid.UUID
	for u := range 6 {
		r, ok := h.reserve(t, int64(7000+u), true, true)
		require.True(t, ok)
		rids = append(rids, r.ReservationID)
	}
	orderOf := func(rid uuid.UUID) uuid.UUID {
		var id uuid.UUID
		require.Eventually(t, func() bool {
			return h.pool.QueryRow(h.ctx, `SELECT order_id FROM orders WHERE reservation_id = $1`, rid).Scan(&id) == nil
		}, 60*time.Second, 100*time.Millisecond)
		return id
	}
	paid := 0
	for _, rid := range rids[:2] { // two buyers pay (in time, unless the machine is slow)
		p, err := sim.Pay(h.ctx, orderOf(rid), 100, "CNY")
		if err == nil {
			paid++
		} else {
			require.ErrorIs(t, err, provider.ErrClosed, "too late: the timer closed it")
		}
		if err == nil && paid == 1 {
			// From now on the channel answers the sixth order's close with
			// this payment's transaction.
			channel.mu.Lock()
			channel.pool, channel.res, channel.stolen = h.pool, rids[5], p.TransactionID
			channel.mu.Unlock()
		}
	}
	require.Positive(t, paid, "at least one payment beat its 5 s timer")
	for _, rid := range rids[2:] {
		orderOf(rid)
	}
	// The sixth order's channel answers with another order's transaction:
	// its timer is quarantined as evidence, never retried forever, and the
	// order is not cancelled (a person decides).
	channel.mu.Lock()
	stolen := channel.stolen
	channel.mu.Unlock()
	require.NotEmpty(t, stolen)
	odd := orderOf(rids[5])
	require.Eventually(t, func() bool {
		return count(t, h.pool, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'CANCELLED'`, h.activity) == 5-paid
	}, 90*time.Second, 200*time.Millisecond, "the unpaid orders are cancelled by their timers")
	require.Eventually(t, func() bool {
		return count(t, h.pool, `SELECT count(*) FROM message_quarantine WHERE consumer_group = 'seckill-test-canceller'
			AND reason_code = 'INCONSISTENT' AND detail LIKE '%' || $1 || '%'`, stolen) == 1
	}, 60*time.Second, 200*time.Millisecond, "the conflicting timer is quarantined once")
	require.Equal(t, "CANCEL_PENDING", func() string {
		var st string
		require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT status FROM orders WHERE order_id = $1`, odd).Scan(&st))
		return st
	}())
	// Settle it as a person would after the review (the channel corrected
	// itself: no payment), so the stock checks below see a closed sale.
	channel.mu.Lock()
	channel.stolen = ""
	channel.mu.Unlock()
	out, err := (&ordercancel.Canceller{Pool: h.pool, Channel: channel, Payments: payments, EventsTopic: topicEvents}).Handle(h.ctx, odd)
	require.NoError(t, err)
	require.Equal(t, ordercancel.Cancelled, out.Result)
	require.Eventually(t, func() bool {
		return count(t, h.pool, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'CANCELLED'`, h.activity) == 6-paid
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, paid, count(t, h.pool, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'PAID'`, h.activity))
	require.Equal(t, 1, count(t, h.pool, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND occupied_stock = 0 AND sold_stock = $2 AND available_stock = $3`,
		h.activity, paid, 10-paid))
	require.Eventually(t, func() bool {
		c := h.counters(t)
		return c.Committed == int64(paid) && c.OpenReserved == 0 && c.Available == int64(9-paid)
	}, 60*time.Second, 200*time.Millisecond, "Redis releases each cancelled unit once")
	require.Zero(t, h.counters(t).Delta())
}

// The backlog guard pauses time-driven actions for longer than the
// canceller group's delivery limit (3 here) would allow: the timer is
// re-armed as a new delayed message instead of being redelivered into the
// DLQ, and the order is cancelled once the pause is lifted.
func TestPausedTimersAreRearmedNotDeadLettered(t *testing.T) {
	sim := &provider.Sim{ProviderName: "sim"}
	h := startOn(t, testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), 5, 3, time.Second, sim, func(c *pipeline.Canceller) {
		c.RearmAfter, c.Cancel.Wait = 2, time.Second
	})
	// The recorded payment window is the one orders get (1 s, as the
	// harness's fallback).
	_, err := h.pool.Exec(h.ctx, `INSERT INTO activity_control (activity_id, compensation_paused, payment_window_ms) VALUES ($1, true, 1000)`, h.activity)
	require.NoError(t, err)
	r, ok := h.reserve(t, 7100, true, true)
	require.True(t, ok)
	var order uuid.UUID
	require.Eventually(t, func() bool {
		return h.pool.QueryRow(h.ctx, `SELECT order_id FROM orders WHERE reservation_id = $1`, r.ReservationID).Scan(&order) == nil
	}, 60*time.Second, 100*time.Millisecond)
	rearmed := func() int {
		return count(t, h.pool, `SELECT count(*) FROM event_outbox WHERE aggregate_id = $1 AND event_type = 'ORDER_CANCEL_TIMER'`, order) - 1
	}
	require.Eventually(t, func() bool { return rearmed() >= 3 }, 90*time.Second, 200*time.Millisecond,
		"re-armed again and again while paused (more waits than the group's delivery limit)")
	var status string
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT status FROM orders WHERE order_id = $1`, order).Scan(&status))
	require.Equal(t, "CREATED", status, "nothing cancelled while paused")

	_, err = h.pool.Exec(h.ctx, `UPDATE activity_control SET compensation_paused = false WHERE activity_id = $1`, h.activity)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return h.pool.QueryRow(h.ctx, `SELECT status FROM orders WHERE order_id = $1`, order).Scan(&status) == nil && status == "CANCELLED"
	}, 60*time.Second, 200*time.Millisecond, "cancelled by the re-armed timer once the pause is lifted")
	require.Eventually(t, func() bool { return h.counters(t).Committed == 0 && h.counters(t).Available == 3 },
		30*time.Second, 200*time.Millisecond, "Redis released the unit once")
}
