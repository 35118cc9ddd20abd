package pipeline_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/pipeline"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/testenv"
)

const (
	topicCreate = "seckill-test-order-create"
	topicEvents = "seckill-test-order-events"
	sku         = int64(5)
	buckets     = 3
)

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// A whole sale through the real pipeline: Redis holds more stock (30) than
// PostgreSQL (25), 100 buyers with client retries; every accepted reservation
// ends ORDER_CREATED or COMPENSATED, and the invariants hold.
func TestWholeSaleThroughThePipeline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	pool := testenv.Database(t)
	rdb := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(ctx, rdb))
	rs := redisstore.New(rdb)
	ring, _ := ids.NewKeyring(1, map[byte][]byte{1: []byte("pipeline-test-key-0123456789abcdef")})

	activity := time.Now().UnixNano() % 1_000_000_000_000
	const pgStock, redisStock, buyers = 25, 30, 100
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`, activity, sku, pgStock)
	require.NoError(t, err)
	for _, sl := range redisstore.Slots(activity, sku, buckets) {
		_, _, err := rs.Provision(ctx, sl, redisStock/buckets, 1)
		require.NoError(t, err)
		require.NoError(t, rs.SetWindow(ctx, sl, redisstore.WindowActive))
	}

	producer, err := mq.NewProducer(endpoint, topicCreate, topicEvents)
	require.NoError(t, err)
	defer producer.Close()
	orderMQ, err := mq.NewConsumer(endpoint, "seckill-test-consumer", topicCreate)
	require.NoError(t, err)
	defer orderMQ.Close()
	projMQ, err := mq.NewConsumer(endpoint, "seckill-test-projector", topicEvents)
	require.NoError(t, err)
	defer projMQ.Close()

	workers := []interface{ Run(context.Context) error }{
		&pipeline.OrderConsumer{MQ: orderMQ, Topic: topicCreate, Invisible: 10 * time.Second, Log: log,
			Store: &orderstore.Consumer{Pool: pool, Group: "seckill-test-consumer", PaymentWindow: 15 * time.Minute, EventsTopic: topicEvents}},
		&pipeline.Relay{Producer: producer, Batch: 32, Log: log,
			Store: &outbox.Store{Pool: pool, Owner: "relay-1", Lease: 30 * time.Second, MaxAttempts: 10}},
		&pipeline.Relay{Producer: producer, Batch: 32, Log: log,
			Store: &outbox.Store{Pool: pool, Owner: "relay-2", Lease: 30 * time.Second, MaxAttempts: 10}},
		&pipeline.Projector{MQ: projMQ, Redis: rs, Pool: pool, Group: "seckill-test-projector", Invisible: 10 * time.Second, Log: log},
		&pipeline.Compensator{Batch: 16, Log: log, Worker: &compensation.Worker{Pool: pool, Redis: rs, Owner: "comp-1",
			Lease: 30 * time.Second, MaxAttempts: 10, TerminalTTL: time.Hour}},
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	defer wg.Wait()
	defer cancel()

	// The buyers: reserve (with a retry for every third), send at once with the fixed id.
	var mu sync.Mutex
	accepted := map[string]bool{}
	var bwg sync.WaitGroup
	for u := range buyers {
		bwg.Add(1)
		go func(user int64) {
			defer bwg.Done()
			sl := redisstore.BucketSlot(activity, sku, int(user)%buckets)
			req := ids.NewRandom()
			rid := ring.ReservationID(ids.ReservationKey{ActivityID: activity, SKUID: sku, UserID: user, RequestID: req})
			mid, _ := ring.MessageID(rid, 1)
			now := time.Now()
			r := redisstore.ReserveRequest{Slot: sl, ReservationID: rid, MessageID: mid, RequestID: req, UserID: user,
				Now: now, BusinessDeadline: now.Add(5 * time.Minute), SendDue: now.Add(5 * time.Second),
				RequestTTL: time.Minute, SchemaVersion: 1, KeyVersion: 1}
			for try := 0; try < 1+int(user%3/2); try++ {
				res, err := rs.Reserve(ctx, r)
				if err != nil || res.Code != redisstore.ReserveOK {
					continue
				}
				mu.Lock()
				accepted[rid.String()] = true
				mu.Unlock()
				body, _ := events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested,
					MessageID: mid, MessageKey: rid.String(), RequestID: req, ReservationID: rid, ActivityID: activity,
					SKUID: sku, UserID: user, Bucket: sl.Bucket, ReservedAt: now, BusinessDeadline: r.BusinessDeadline}.Marshal()
				if _, err := producer.Send(ctx, mq.Message{Topic: topicCreate, MessageID: mid.String(), Key: rid.String(),
					Tag: events.TypeOrderCreateRequested, Body: body}); err == nil {
					_, _ = rs.AckSend(ctx, sl, rid, r.SendDue.UnixMilli(), time.Now())
				}
			}
		}(int64(1000 + u))
	}
	bwg.Wait()
	require.Len(t, accepted, redisStock, "Redis admits exactly its stock")

	// A malformed message on the topic is quarantined, and the consumer keeps going.
	_, err = producer.Send(ctx, mq.Message{Topic: topicCreate, MessageID: ids.NewRandom().String(), Body: []byte(`{"schema_version":9}`)})
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

	// Invariants.
	require.Equal(t, pgStock, count(t, pool, `SELECT count(*) FROM orders WHERE activity_id = $1`, activity), "exactly the PostgreSQL stock is sold")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM (SELECT user_id FROM orders GROUP BY activity_id, sku_id, user_id HAVING count(*) > 1) d`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM sku_inventory WHERE initial_stock <> available_stock + occupied_stock + sold_stock`))
	require.Equal(t, redisStock-pgStock, count(t, pool, `SELECT count(*) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id) WHERE r.activity_id = $1 AND t.status = 'APPLIED'`, activity))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM event_outbox WHERE status <> 'SENT'`))
	var total redisstore.Counters
	for _, sl := range redisstore.Slots(activity, sku, buckets) {
		x, err := rs.ReadCounters(ctx, sl)
		require.NoError(t, err)
		total = total.Add(x)
	}
	require.Zero(t, total.Delta(), "Redis conservation")
	var pgCommitted int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT occupied_stock + sold_stock FROM sku_inventory WHERE activity_id = $1`, activity).Scan(&pgCommitted))
	require.Equal(t, pgCommitted, total.Committed, "Redis committed = PostgreSQL occupied + sold")
	require.Equal(t, int64(redisStock-pgStock), total.Available, "the compensated units are sellable in Redis again")
}
