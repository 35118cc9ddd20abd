package cancel_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/cancel"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/repair"
)

// orders makes n real orders through the order transaction, each of its own
// user, expiring after window.
func orders(t *testing.T, pool *pgxpool.Pool, n int, window time.Duration) (int64, []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	activity := time.Now().UnixNano() % 1_000_000_000_000
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock, price_cents) VALUES ($1, 1, $2, $2, 100)`, activity, n)
	require.NoError(t, err)
	c := &orderstore.Consumer{Pool: pool, Group: "g", PaymentWindow: window}
	out := make([]uuid.UUID, n)
	for i := range out {
		now := time.Now().UnixMilli()
		msg := events.NewOrderCreateRequested(ids.NewRandom(), ids.NewRandom(), ids.NewRandom(), activity, 1, int64(i+1), -1, now, now+300_000, "t")
		body, _ := msg.Marshal()
		o, err := c.Consume(ctx, msg, body)
		require.NoError(t, err)
		require.Equal(t, orderstore.ResultOrderCreated, o.Result)
		out[i] = o.OrderID
	}
	return activity, out
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// untilDone runs the timer until it reaches a final answer.
func untilDone(t *testing.T, c *cancel.Canceller, order uuid.UUID) string {
	for {
		out, err := c.Handle(context.Background(), order)
		if err != nil {
			t.Error(err)
			return ""
		}
		if out.Result != cancel.Early && out.Result != cancel.Unknown {
			return out.Result
		}
		time.Sleep(time.Millisecond)
	}
}

// design.md#payment-cancel: payments race the timeout cancel, each order twice-timed
// (duplicate timers) while its buyer pays — half through a channel that
// also reports successes after a close, with late, duplicated callbacks.
// No PAID order is ever cancelled, no cancelled order keeps a successful
// payment (every paid-after-cancel is in the refund flow), stock is
// conserved and every order ends PAID or CANCELLED.
// $SECKILL_RACE_ITERATIONS raises the count (make race).
func TestPaymentRacesTimeoutCancel(t *testing.T) {
	n := 400
	if v, err := strconv.Atoi(os.Getenv("SECKILL_RACE_ITERATIONS")); err == nil && v > 0 {
		n = v
	}
	pool := testenv.Database(t)
	activity, list := orders(t, pool, n, time.Millisecond)
	payments := &payment.Store{Pool: pool}
	deliver := func(name string) func(context.Context, uuid.UUID, provider.Paid) error {
		return func(ctx context.Context, order uuid.UUID, p provider.Paid) error {
			_, err := payments.Apply(ctx, payment.Callback{Provider: name, TransactionID: p.TransactionID, OrderID: order,
				AmountCents: p.AmountCents, Currency: p.Currency, PaidAt: p.At})
			return err
		}
	}
	plain := &provider.Sim{ProviderName: "sim-plain"}
	plain.Deliver = deliver("sim-plain")
	racy := &provider.Sim{ProviderName: "sim-racy", SuccessAfterClose: true, Duplicates: 2, CallbackDelay: time.Millisecond}
	racy.Deliver = deliver("sim-racy")
	sims := []*provider.Sim{plain, racy}

	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i, order := range list {
		sim := sims[i%2]
		c := &cancel.Canceller{Pool: pool, Channel: sim, Payments: payments}
		for _, job := range []func(){
			func() {
				if i%3 == 2 {
					return // this buyer never pays
				}
				time.Sleep(time.Duration(i*7919%5) * time.Millisecond) // interleave with the timers
				_, _ = sim.Pay(context.Background(), order, 100, "CNY")
			},
			func() { untilDone(t, c, order) },
			func() { untilDone(t, c, order) }, // a duplicate timer
		} {
			wg.Add(1)
			sem <- struct{}{}
			go func() { defer wg.Done(); defer func() { <-sem }(); job() }()
		}
	}
	wg.Wait()

	paid := count(t, pool, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'PAID'`, activity)
	cancelled := count(t, pool, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'CANCELLED'`, activity)
	require.Equal(t, n, paid+cancelled, "every order ended PAID or CANCELLED")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM orders o JOIN payment_record p USING (order_id)
		WHERE o.activity_id = $1 AND o.status = 'CANCELLED' AND p.status = 'SUCCESS'`, activity), "no cancelled order keeps a success")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM orders o WHERE o.activity_id = $1 AND o.status = 'PAID'
		AND (SELECT count(*) FROM payment_record p WHERE p.order_id = o.order_id AND p.status = 'SUCCESS') <> 1`, activity), "a PAID order has one success")
	refunds := count(t, pool, `SELECT count(*) FROM payment_record p JOIN orders o USING (order_id) WHERE o.activity_id = $1 AND p.status = 'REFUNDING'`, activity)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND occupied_stock = 0
		AND sold_stock = $2 AND available_stock = $3`, activity, paid, cancelled), "stock conserved: sold = paid, the cancelled back on sale")
	require.Equal(t, paid, count(t, pool, `SELECT count(*) FROM inventory_ledger WHERE activity_id = $1 AND entry_type = 'SELL'`, activity))
	require.Equal(t, cancelled, count(t, pool, `SELECT count(*) FROM inventory_ledger WHERE activity_id = $1 AND entry_type = 'RELEASE'`, activity))
	require.Equal(t, cancelled, count(t, pool, `SELECT count(*) FROM event_outbox e JOIN orders o ON o.order_id = e.aggregate_id
		WHERE o.activity_id = $1 AND e.event_type = 'ORDER_CANCELLED'`, activity), "one ORDER_CANCELLED per cancellation")
	t.Logf("%d orders: %d paid, %d cancelled, %d paid after cancel → refund flow", n, paid, cancelled, refunds)
	require.Positive(t, cancelled, "the race was run: some orders were cancelled")
	require.Positive(t, paid, "the race was run: some payers won")
}

// Timers that come early, twice or late change nothing they should not.
func TestEarlyDuplicateAndLateTimers(t *testing.T) {
	pool := testenv.Database(t)
	payments := &payment.Store{Pool: pool}
	sim := &provider.Sim{ProviderName: "sim"}
	c := &cancel.Canceller{Pool: pool, Channel: sim, Payments: payments}
	ctx := context.Background()

	activity, list := orders(t, pool, 3, time.Hour)
	early, err := c.Handle(ctx, list[0])
	require.NoError(t, err)
	require.Equal(t, cancel.Early, early.Result)
	require.WithinDuration(t, time.Now().Add(time.Hour), early.RetryAt, time.Minute)
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'CREATED'`, activity))

	// Expired: cancelled once; the duplicate and the late timer find it finished.
	_, err = pool.Exec(ctx, `UPDATE orders SET expires_at = now() - interval '1 second' WHERE activity_id = $1`, activity)
	require.NoError(t, err)
	for i, want := range []string{cancel.Cancelled, cancel.Finished, cancel.Finished} {
		out, err := c.Handle(ctx, list[0])
		require.NoError(t, err)
		require.Equal(t, want, out.Result, "timer %d", i)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM inventory_ledger WHERE order_id = $1 AND entry_type = 'RELEASE'`, list[0]))

	// The pause flag holds time-driven cancellation.
	_, err = pool.Exec(ctx, `INSERT INTO activity_control (activity_id, compensation_paused) VALUES ($1, true)`, activity)
	require.NoError(t, err)
	out, err := c.Handle(ctx, list[1])
	require.NoError(t, err)
	require.Equal(t, cancel.Paused, out.Result)
	_, err = pool.Exec(ctx, `UPDATE activity_control SET compensation_paused = false WHERE activity_id = $1`, activity)
	require.NoError(t, err)

	// A reservation frozen for manual review (design.md#runbook step 1) keeps its
	// order's timer waiting; lifted, the timer cancels it.
	rid := uuid.Nil
	require.NoError(t, pool.QueryRow(ctx, `SELECT reservation_id FROM orders WHERE order_id = $1`, list[1]).Scan(&rid))
	frozen, err := (&repair.Store{Pool: pool}).Freeze(ctx, rid, repair.Audit{Operator: "alice", Reason: "review"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, repair.Applied, frozen.Status)
	out, err = c.Handle(ctx, list[1])
	require.NoError(t, err)
	require.Equal(t, cancel.Frozen, out.Result)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'CREATED'`, list[1]))
	_, err = (&repair.Store{Pool: pool}).Unfreeze(ctx, rid, repair.Audit{Operator: "alice", Approver: "bob", Reason: "reviewed"})
	require.NoError(t, err)
	out, err = c.Handle(ctx, list[1])
	require.NoError(t, err)
	require.Equal(t, cancel.Cancelled, out.Result)

	// Paid before the timer: the timer finds it finished.
	_, err = sim.Pay(ctx, list[2], 100, "CNY") // no Deliver: the channel knows, PostgreSQL not yet
	require.NoError(t, err)
	out, err = c.Handle(ctx, list[2])
	require.NoError(t, err)
	require.Equal(t, cancel.PaidInstead, out.Result, "the channel's success is applied, not cancelled")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'PAID'`, list[2]))
	out, err = c.Handle(ctx, list[2])
	require.NoError(t, err)
	require.Equal(t, cancel.Finished, out.Result)

	_, err = c.Handle(ctx, ids.NewRandom())
	require.ErrorIs(t, err, cancel.ErrNoOrder)
}

// A paused timer waits Wait; re-armed, it becomes one new delayed outbox
// message due then, under an id derived from the delivered timer's, however
// often that delivery repeats.
func TestPausedTimerIsRearmedOnce(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Database(t)
	activity, orderIDs := orders(t, pool, 1, time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	_, err := pool.Exec(ctx, `INSERT INTO activity_control (activity_id, compensation_paused) VALUES ($1, true)`, activity)
	require.NoError(t, err)
	c := &cancel.Canceller{Pool: pool, Channel: &provider.Sim{ProviderName: "sim"}, Wait: 3 * time.Second}
	out, err := c.Handle(ctx, orderIDs[0])
	require.NoError(t, err)
	require.Equal(t, cancel.Paused, out.Result)
	require.WithinDuration(t, time.Now().Add(3*time.Second), out.RetryAt, time.Second)

	for i, want := range []bool{true, false, false} {
		wrote, err := c.Rearm(ctx, "timer-message-1", "seckill-order-cancel", orderIDs[0], out.RetryAt)
		require.NoError(t, err)
		require.Equal(t, want, wrote, "call %d", i)
	}
	var (
		topic   string
		at      time.Time
		payload []byte
	)
	require.NoError(t, pool.QueryRow(ctx, `SELECT topic, deliver_at, payload FROM event_outbox WHERE event_id = $1`,
		cancel.RearmID("timer-message-1")).Scan(&topic, &at, &payload))
	require.Equal(t, "seckill-order-cancel", topic)
	require.WithinDuration(t, out.RetryAt, at, time.Millisecond)
	require.Contains(t, string(payload), orderIDs[0].String())
	require.Equal(t, "CREATED", func() string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, orderIDs[0]).Scan(&s))
		return s
	}(), "paused: nothing cancelled")
	// A re-armed timer re-arms under its own id: a chain, never a fan-out.
	require.NotEqual(t, cancel.RearmID("timer-message-1"), cancel.RearmID(cancel.RearmID("timer-message-1").String()))
}

// design.md#failpoints after_cancel_pending: the canceller dies with the order
// committed CANCEL_PENDING, before asking the channel. The order holds its
// unit; a payment may still win; the next timer finishes the cancel once.
func TestCrashAfterCancelPending(t *testing.T) {
	pool := testenv.Database(t)
	sim := &provider.Sim{ProviderName: "sim"}
	crashing := &cancel.Canceller{Pool: pool, Channel: sim, Payments: &payment.Store{Pool: pool}, Failpoint: func(name string) error {
		if name == "after_cancel_pending" {
			return errors.New("crash at " + name)
		}
		return nil
	}}
	c := &cancel.Canceller{Pool: pool, Channel: sim, Payments: &payment.Store{Pool: pool}}
	ctx := context.Background()
	activity, list := orders(t, pool, 2, time.Hour)
	_, err := pool.Exec(ctx, `UPDATE orders SET expires_at = now() - interval '1 second' WHERE activity_id = $1`, activity)
	require.NoError(t, err)
	for _, o := range list {
		_, err := crashing.Handle(ctx, o)
		require.Error(t, err)
	}
	require.Equal(t, 2, count(t, pool, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'CANCEL_PENDING'`, activity))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND occupied_stock = 2`, activity))

	// The buyer of the second order pays meanwhile: the payment wins.
	_, err = sim.Pay(ctx, list[1], 100, "CNY")
	require.NoError(t, err)
	require.Equal(t, cancel.Cancelled, untilDone(t, c, list[0]))
	require.Equal(t, cancel.PaidInstead, untilDone(t, c, list[1]))
	require.Equal(t, cancel.Finished, untilDone(t, c, list[0]))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM inventory_ledger WHERE order_id = $1 AND entry_type = 'RELEASE'`, list[0]))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND available_stock = 1 AND occupied_stock = 0 AND sold_stock = 1`, activity))
}
