package orderstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/orderstore"
)

const activity, sku = int64(1001), int64(90001)

type bundle struct {
	pool *pgxpool.Pool
	c    *orderstore.Consumer
	now  time.Time
}

func setup(t *testing.T, stock int64) *bundle {
	t.Helper()
	pool := testenv.Database(t)
	_, err := pool.Exec(context.Background(),
		`INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`, activity, sku, stock)
	require.NoError(t, err)
	now := time.Date(2026, 6, 25, 9, 0, 0, 0, time.UTC)
	return &bundle{pool: pool, now: now, c: &orderstore.Consumer{Pool: pool, Group: "seckill-order-consumer",
		PaymentWindow: 15 * time.Minute, Now: func() time.Time { return now.Add(time.Second) }}}
}

func (b *bundle) message(t *testing.T, user int64) (events.OrderCreateRequested, []byte) {
	t.Helper()
	rid := ids.NewRandom()
	m := events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested,
		MessageID: ids.NewRandom(), MessageKey: rid.String(), RequestID: ids.NewRandom(), ReservationID: rid,
		ActivityID: activity, SKUID: sku, UserID: user, Bucket: -1, ReservedAt: b.now, BusinessDeadline: b.now.Add(5 * time.Minute)}
	raw, err := m.Marshal()
	require.NoError(t, err)
	return m, raw
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

type stock struct{ initial, available, occupied, sold int64 }

func (b *bundle) stock(t *testing.T) stock {
	t.Helper()
	var s stock
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT initial_stock, available_stock, occupied_stock, sold_stock FROM sku_inventory WHERE activity_id = $1 AND sku_id = $2`,
		activity, sku).Scan(&s.initial, &s.available, &s.occupied, &s.sold))
	require.Equal(t, s.initial, s.available+s.occupied+s.sold, "PostgreSQL conservation")
	return s
}

func TestOrderCreated(t *testing.T) {
	b := setup(t, 10)
	m, raw := b.message(t, 7)
	out, err := b.c.Consume(context.Background(), m, raw)
	require.NoError(t, err)
	require.Equal(t, orderstore.Ack, out.Action)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)
	require.NotEqual(t, uuid.Nil, out.OrderID)
	require.Equal(t, stock{10, 9, 1, 0}, b.stock(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM orders WHERE reservation_id = $1 AND order_id = $2 AND status = 'CREATED' AND expires_at > now()`, m.ReservationID, out.OrderID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM inventory_reservation WHERE reservation_id = $1 AND status = 'ORDER_CREATED' AND order_id = $2`, m.ReservationID, out.OrderID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM inventory_ledger WHERE idempotency_key = 'OCCUPY:' || $1::text`, m.ReservationID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM event_outbox WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED' AND status = 'PENDING'`, m.ReservationID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM consumer_inbox WHERE message_id = $1 AND result_code = 'ORDER_CREATED' AND order_id = $2`, m.MessageID, out.OrderID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM event_outbox e JOIN orders o ON o.order_id = e.aggregate_id
		WHERE o.order_id = $1 AND e.event_type = 'ORDER_CANCEL_TIMER' AND e.deliver_at = o.expires_at AND e.topic = 'seckill-order-cancel'`, out.OrderID),
		"the timeout-cancel timer, due at expires_at")
}

// design.md#invariants: one message delivered 10,000 times at once.
func TestSameMessageTenThousandTimes(t *testing.T) {
	b := setup(t, 10)
	m, raw := b.message(t, 7)
	var wg sync.WaitGroup
	var mu sync.Mutex
	actions := map[orderstore.Action]int{}
	var firstErr error
	sem := make(chan struct{}, 32)
	for range 10000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out, err := b.c.Consume(context.Background(), m, raw)
			mu.Lock()
			defer mu.Unlock()
			actions[out.Action]++
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	require.NoError(t, firstErr)
	require.Equal(t, map[orderstore.Action]int{orderstore.Ack: 10000}, actions)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM consumer_inbox`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM orders`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM inventory_ledger WHERE entry_type = 'OCCUPY'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM event_outbox WHERE event_type = 'ORDER_CREATED'`))
	require.Equal(t, stock{10, 9, 1, 0}, b.stock(t))
}

// design.md#invariants: 1,000 reservations of one user with different request ids
// (Redis lost the user's marker each time, as a failover can) reach the
// consumers in batches, four consumers at once, as under load → one order,
// PostgreSQL stock down by one, every other reservation rejected and
// followed to COMPENSATED in Redis — and every invariant holds.
func TestOneUserThousandReservations(t *testing.T) {
	ctx := context.Background()
	s := testsale.New(t, 2000, 1000)
	items := make([]orderstore.Item, 0, 1000)
	for range 1000 {
		require.NoError(t, s.Redis.Client().Del(ctx, s.Slot.User(42)).Err())
		msg := s.Reserve(t, 42, time.Hour, true)
		raw, err := msg.Marshal()
		require.NoError(t, err)
		items = append(items, orderstore.Item{Msg: msg, Raw: raw})
	}
	counts := &orderstore.BatchCounts{}
	c := *s.Consumer
	c.Batches = counts
	var mu sync.Mutex
	results := map[string]int{}
	var order events.OrderCreateRequested
	var orderID uuid.UUID
	batches := make(chan []orderstore.Item)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				for i, r := range c.ConsumeBatch(ctx, b) {
					mu.Lock()
					if r.Err != nil {
						results["error: "+r.Err.Error()]++
					} else {
						results[r.Outcome.Result+"/"+r.Outcome.Reason]++
					}
					if r.Outcome.Result == orderstore.ResultOrderCreated {
						order, orderID = b[i].Msg, r.Outcome.OrderID
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < len(items); i += 16 {
		batches <- items[i:min(i+16, len(items))]
	}
	close(batches)
	wg.Wait()
	require.Equal(t, map[string]int{"ORDER_CREATED/": 1, "ORDER_REJECTED/ALREADY_PURCHASED": 999}, results)
	require.Positive(t, counts.FellBack.Load(), "a user twice in a batch takes the savepoint path")
	require.Equal(t, "1", s.One(t, `SELECT count(*) FROM orders WHERE activity_id = $1`, s.Activity))
	require.Equal(t, "999", s.One(t, `SELECT count(*) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id)
		WHERE r.activity_id = $1 AND r.reason_code = 'ALREADY_PURCHASED'`, s.Activity))

	// The projection of the order and the compensations, as the projector
	// and the compensator run them; the outbox events marked sent as the
	// relay would.
	s.Project(t, order, orderID)
	for range 20 {
		s.CompensateAll(t)
	}
	s.Exec(t, `UPDATE event_outbox SET status = 'SENT', sent_at = clock_timestamp() WHERE payload->>'activity_id' = $1::bigint::text`, s.Activity)
	require.Equal(t, "999", s.One(t, `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status = 'COMPENSATED'`, s.Activity))
	cs := s.Counters(t)
	require.Equal(t, int64(999), cs.Available, "every extra unit back in Redis, once")
	require.Equal(t, int64(1), cs.Committed)
	rep, err := invariants.Run(ctx, invariants.Sources{Pool: s.Pool, Redis: s.Redis}, s.Activity,
		[]invariants.SKU{{ID: testsale.SKUID, Buckets: 1}}, invariants.Expect{Settled: true})
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.String())
}

func TestStockExhaustedIsRejectedOnceAndLateMessagesStay(t *testing.T) {
	b := setup(t, 1)
	m1, raw1 := b.message(t, 1)
	out, err := b.c.Consume(context.Background(), m1, raw1)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)

	m2, raw2 := b.message(t, 2)
	out, err = b.c.Consume(context.Background(), m2, raw2)
	require.NoError(t, err)
	require.Equal(t, orderstore.Ack, out.Action)
	require.Equal(t, orderstore.ResultOrderRejected, out.Result)
	require.Equal(t, orderstore.ReasonStockExhausted, out.Reason)
	require.Equal(t, stock{1, 0, 1, 0}, b.stock(t))

	// The same message again: the recorded outcome.
	out, err = b.c.Consume(context.Background(), m2, raw2)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderRejected, out.Result)

	// The same reservation under another message id contradicts the stable
	// id derivation: a conflict for review, never a second decision.
	late := m2
	late.MessageID = ids.NewRandom()
	rawLate, _ := late.Marshal()
	out, err = b.c.Consume(context.Background(), late, rawLate)
	require.Error(t, err, "a reservation row recorded for another message is a conflict")
	require.Equal(t, orderstore.Manual, out.Action)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM compensation_task`))
}

// The reconcile job persisted a timeout rejection before the message ever
// arrived (design.md#late-messages, design.md#reconcile): the message ends LATE_REJECTED, acked, with no
// order and no second compensation task.
func TestMessageAfterPersistedRejectionIsLateRejected(t *testing.T) {
	b := setup(t, 5)
	m, raw := b.message(t, 3)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO inventory_reservation
		(reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reason_code, reserved_at, business_deadline)
		VALUES ($1, $2, $3, $4, $5, $6, 'COMPENSATED', 'BUSINESS_DEADLINE_EXCEEDED', $7, $8)`,
		m.ReservationID, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline)
	require.NoError(t, err)
	for range 3 {
		out, err := b.c.Consume(context.Background(), m, raw)
		require.NoError(t, err)
		require.Equal(t, orderstore.Ack, out.Action)
		require.Equal(t, orderstore.ResultLateRejected, out.Result)
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM orders`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM compensation_task`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM consumer_inbox WHERE result_code = 'LATE_REJECTED'`))
	require.Equal(t, stock{5, 5, 0, 0}, b.stock(t))
}

func TestLateAfterPersistedDeadlineRejection(t *testing.T) {
	b := setup(t, 5)
	m, raw := b.message(t, 3)
	// The message arrives after its business deadline: rejected and persisted.
	late := *b.c
	late.Now = func() time.Time { return b.now.Add(time.Hour) }
	out, err := late.Consume(context.Background(), m, raw)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderRejected, out.Result)
	require.Equal(t, orderstore.ReasonDeadlineExceeded, out.Reason)
	require.Equal(t, stock{5, 5, 0, 0}, b.stock(t))
	// A redelivery answers the recorded outcome; nothing new is written.
	out, err = b.c.Consume(context.Background(), m, raw)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderRejected, out.Result)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM compensation_task`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM orders`))

	// While the backlog guard pauses deadline rejection, a late message still
	// becomes an order.
	_, err = b.pool.Exec(context.Background(), `INSERT INTO activity_control (activity_id, window_state, compensation_paused) VALUES ($1, 'ACTIVE', true)`, activity)
	require.NoError(t, err)
	m2, raw2 := b.message(t, 4)
	out, err = late.Consume(context.Background(), m2, raw2)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)
}

func TestSameIDDifferentPayloadIsManual(t *testing.T) {
	b := setup(t, 5)
	m, raw := b.message(t, 3)
	_, err := b.c.Consume(context.Background(), m, raw)
	require.NoError(t, err)
	forged := m
	forged.UserID = 99
	rawForged, _ := forged.Marshal()
	out, err := b.c.Consume(context.Background(), forged, rawForged)
	require.ErrorIs(t, err, orderstore.ErrPayloadConflict)
	require.Equal(t, orderstore.Manual, out.Action)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM orders`))
}

// A failpoint before commit aborts everything: nothing is written, and the
// redelivery does the work once.
func TestFailpointsBeforeCommitRollBack(t *testing.T) {
	for _, fp := range []string{"after_inbox_insert", "after_pg_stock_decrement", "after_order_insert"} {
		t.Run(fp, func(t *testing.T) {
			b := setup(t, 5)
			m, raw := b.message(t, 3)
			crashing := *b.c
			crashing.Failpoint = func(name string) error {
				if name == fp {
					return errors.New("injected crash at " + name)
				}
				return nil
			}
			out, err := crashing.Consume(context.Background(), m, raw)
			require.Error(t, err)
			require.Equal(t, orderstore.Retry, out.Action)
			require.Zero(t, b.count(t, `SELECT count(*) FROM consumer_inbox`))
			require.Equal(t, stock{5, 5, 0, 0}, b.stock(t))
			out, err = b.c.Consume(context.Background(), m, raw)
			require.NoError(t, err)
			require.Equal(t, orderstore.ResultOrderCreated, out.Result)
			require.Equal(t, stock{5, 4, 1, 0}, b.stock(t))
		})
	}
}
