package compensation_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// bundle: a SKU with more Redis stock than PostgreSQL stock, so the consumer
// rejects reservations and leaves real compensation tasks (design.md#faults row 8).
type bundle struct {
	pool     *pgxpool.Pool
	rs       *redisstore.Store
	slot     redisstore.Slot
	consumer *orderstore.Consumer
	ring     *ids.Keyring
	now      time.Time
}

func setup(t *testing.T, pgStock, redisStock int64) *bundle {
	t.Helper()
	ctx := context.Background()
	pool := testenv.Database(t)
	c := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(ctx, c))
	rs := redisstore.New(c)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	slot := redisstore.BucketSlot(activity, 7, 2)
	_, _, err := rs.Provision(ctx, slot, redisStock, 1)
	require.NoError(t, err)
	require.NoError(t, rs.SetWindow(ctx, slot, redisstore.WindowActive))
	_, err = pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, 7, $2, $2)`, activity, pgStock)
	require.NoError(t, err)
	ring, _ := ids.NewKeyring(1, map[byte][]byte{1: []byte("compensation-test-key-0123456789ab")})
	now := time.Now()
	return &bundle{pool: pool, rs: rs, slot: slot, ring: ring, now: now,
		consumer: &orderstore.Consumer{Pool: pool, Group: "g", PaymentWindow: time.Minute}}
}

// buy reserves in Redis and consumes the order-create message in PostgreSQL.
func (b *bundle) buy(t *testing.T, user int64) (uuid.UUID, orderstore.Outcome) {
	t.Helper()
	ctx := context.Background()
	req := ids.NewRandom()
	rid := b.ring.ReservationID(ids.ReservationKey{ActivityID: b.slot.ActivityID, SKUID: 7, UserID: user, RequestID: req})
	mid, _ := b.ring.MessageID(rid, 1)
	res, err := b.rs.Reserve(ctx, redisstore.ReserveRequest{Slot: b.slot, ReservationID: rid, MessageID: mid, RequestID: req,
		UserID: user, Now: b.now, BusinessDeadline: b.now.Add(time.Hour), SendDue: b.now.Add(time.Second),
		RequestTTL: time.Minute, SchemaVersion: 1, KeyVersion: 1})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Code)
	m := events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested, MessageID: mid,
		MessageKey: rid.String(), RequestID: req, ReservationID: rid, ActivityID: b.slot.ActivityID, SKUID: 7,
		UserID: user, Bucket: b.slot.Bucket, ReservedAt: b.now, BusinessDeadline: b.now.Add(time.Hour)}
	raw, _ := m.Marshal()
	out, err := b.consumer.Consume(ctx, m, raw)
	require.NoError(t, err)
	return rid, out
}

func (b *bundle) worker(owner string) *compensation.Worker {
	return &compensation.Worker{Pool: b.pool, Redis: b.rs, Owner: owner, Lease: 30 * time.Second,
		MaxAttempts: 5, TerminalTTL: time.Hour}
}

func (b *bundle) state(t *testing.T, rid uuid.UUID) (reservation, task string) {
	t.Helper()
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT r.status, t.status FROM inventory_reservation r
		JOIN compensation_task t USING (reservation_id) WHERE r.reservation_id = $1`, rid).Scan(&reservation, &task))
	return
}

func (b *bundle) counters(t *testing.T) redisstore.Counters {
	c, err := b.rs.ReadCounters(context.Background(), b.slot)
	require.NoError(t, err)
	return c
}

func TestRejectedReservationIsCompensatedOnce(t *testing.T) {
	b := setup(t, 1, 3)
	_, out := b.buy(t, 1)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)
	rid, out := b.buy(t, 2)
	require.Equal(t, orderstore.ReasonStockExhausted, out.Reason)
	require.Equal(t, redisstore.Counters{Initial: 3, Available: 1, OpenReserved: 2, Exists: true}, b.counters(t))

	w := b.worker("w1")
	tasks, err := w.Claim(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, b.slot, tasks[0].Slot, "the task finds the reservation's bucket")
	outcome, reason, err := w.Run(context.Background(), tasks[0])
	require.NoError(t, err)
	require.Equal(t, compensation.OutcomeApplied, outcome)
	require.Equal(t, "COMPENSATED", reason)
	r, task := b.state(t, rid)
	require.Equal(t, "COMPENSATED", r)
	require.Equal(t, "APPLIED", task)
	require.Equal(t, redisstore.Counters{Initial: 3, Available: 2, OpenReserved: 1, Exists: true}, b.counters(t))

	tasks, err = w.Claim(context.Background(), 10)
	require.NoError(t, err)
	require.Empty(t, tasks, "an applied task is never run again")
}

// A worker that dies after the Lua and before PostgreSQL: the lease expires,
// another worker runs the same steps, the Lua answers ALREADY_COMPENSATED and
// PostgreSQL completes; Redis stock rose once.
func TestCrashAfterLuaCompletesWithoutSecondIncrement(t *testing.T) {
	b := setup(t, 0, 2)
	rid, _ := b.buy(t, 1)
	dying := b.worker("dying")
	dying.Lease = 50 * time.Millisecond
	dying.Failpoint = func(name string) error { return errors.New("crash at " + name) }
	tasks, err := dying.Claim(context.Background(), 1)
	require.NoError(t, err)
	_, _, err = dying.Run(context.Background(), tasks[0])
	require.Error(t, err)
	r, task := b.state(t, rid)
	require.Equal(t, "COMPENSATING", r)
	require.Equal(t, "CLAIMED", task)
	require.Equal(t, int64(2), b.counters(t).Available)

	w := b.worker("w2")
	w.DBNow = func() time.Time { return time.Now().Add(time.Minute) } // a minute later: the lease ran out
	tasks, err = w.Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "the expired lease is reclaimed")
	outcome, reason, err := w.Run(context.Background(), tasks[0])
	require.NoError(t, err)
	require.Equal(t, compensation.OutcomeApplied, outcome)
	require.Equal(t, "ALREADY_COMPENSATED", reason)
	r, task = b.state(t, rid)
	require.Equal(t, "COMPENSATED", r)
	require.Equal(t, "APPLIED", task)
	require.Equal(t, redisstore.Counters{Initial: 2, Available: 2, Exists: true}, b.counters(t))
}

// A compensation task for a reservation that made its order — a task
// written by a mistaken repair, or a reservation the projection has not yet
// marked in Redis — is refused by the PostgreSQL CAS before Redis is
// touched: the order keeps its unit, the task waits for a person.
func TestTaskForAnOrderedReservationIsRefused(t *testing.T) {
	b := setup(t, 1, 2)
	rid, out := b.buy(t, 1)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key)
		VALUES ($1, $2::uuid, 'RELEASE_REDIS_RESERVATION', 'RELEASE_REDIS_RESERVATION:' || $2::uuid::text)`, ids.NewRandom(), rid)
	require.NoError(t, err)
	w := b.worker("w")
	tasks, err := w.Claim(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	outcome, reason, err := w.Run(context.Background(), tasks[0])
	require.NoError(t, err)
	require.Equal(t, compensation.OutcomeManual, outcome)
	require.Equal(t, "STATE_CONFLICT:ORDER_CREATED", reason)
	r, task := b.state(t, rid)
	require.Equal(t, "ORDER_CREATED", r)
	require.Equal(t, "MANUAL", task)
	require.Equal(t, int64(1), b.counters(t).Available, "the ordered unit is not given back")
}

// A missing Redis reservation is never answered with a blind INCR.
func TestMissingReservationGoesManual(t *testing.T) {
	b := setup(t, 0, 2)
	rid, _ := b.buy(t, 1)
	require.NoError(t, b.rs.Client().Del(context.Background(), b.slot.Reservation(rid)).Err())
	w := b.worker("w")
	tasks, err := w.Claim(context.Background(), 1)
	require.NoError(t, err)
	outcome, reason, err := w.Run(context.Background(), tasks[0])
	require.NoError(t, err)
	require.Equal(t, compensation.OutcomeManual, outcome)
	require.Equal(t, "RESERVATION_MISSING", reason)
	_, task := b.state(t, rid)
	require.Equal(t, "MANUAL", task)
	require.Equal(t, int64(1), b.counters(t).Available, "no stock was added")
}

// design.md#invariants: one compensation run by many workers at once → Redis stock +1, once.
func TestConcurrentWorkersCompensateOnce(t *testing.T) {
	b := setup(t, 0, 1)
	rid, _ := b.buy(t, 1)
	var applied atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := b.worker(string(rune('A' + i)))
			tasks, err := w.Claim(context.Background(), 1)
			if err != nil || len(tasks) == 0 {
				return
			}
			if outcome, _, err := w.Run(context.Background(), tasks[0]); err == nil && outcome == compensation.OutcomeApplied {
				applied.Add(1)
			}
		}(i)
	}
	wg.Wait()
	require.Equal(t, int64(1), applied.Load())
	r, task := b.state(t, rid)
	require.Equal(t, "COMPENSATED", r)
	require.Equal(t, "APPLIED", task)
	require.Equal(t, redisstore.Counters{Initial: 1, Available: 1, Exists: true}, b.counters(t))
}

// While the backlog guard pauses time-driven compensation, the task of a
// deadline rejection waits; the task of a PostgreSQL stock decision runs.
// Once the pause is lifted, the waiting task runs too.
func TestPauseHoldsDeadlineCompensations(t *testing.T) {
	ctx := context.Background()
	b := setup(t, 0, 2)
	byStock, _ := b.buy(t, 1)
	byDeadline, _ := b.buy(t, 2)
	_, err := b.pool.Exec(ctx, `UPDATE inventory_reservation SET reason_code = 'BUSINESS_DEADLINE_EXCEEDED' WHERE reservation_id = $1`, byDeadline)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO activity_control (activity_id, compensation_paused) VALUES ($1, true)`, b.slot.ActivityID)
	require.NoError(t, err)
	w := b.worker("w1")
	tasks, err := w.Claim(ctx, 10)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, byStock, tasks[0].ReservationID)
	_, err = b.pool.Exec(ctx, `UPDATE activity_control SET compensation_paused = false WHERE activity_id = $1`, b.slot.ActivityID)
	require.NoError(t, err)
	tasks, err = w.Claim(ctx, 10)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, byDeadline, tasks[0].ReservationID)
}
