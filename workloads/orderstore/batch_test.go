package orderstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/orderstore"
)

// batch builds ConsumeBatch items for the given users, one fresh
// reservation each.
func (b *bundle) batch(t *testing.T, users ...int64) []orderstore.Item {
	t.Helper()
	items := make([]orderstore.Item, len(users))
	for i, u := range users {
		m, raw := b.message(t, u)
		items[i] = orderstore.Item{Msg: m, Raw: raw}
	}
	return items
}

// Every rule of the one-message transaction holds message by message inside
// one batch: created while stock lasts, the same user rejected, the same
// message twice answered once, a forged payload under a known id kept for
// review, stock exhausted rejected — and the stock conserved.
func TestBatchAppliesEveryRuleInOrder(t *testing.T) {
	b := setup(t, 3)
	items := b.batch(t, 1, 2, 1, 3, 4)
	forged := items[1]
	forged.Msg.UserID = 99
	forged.Raw, _ = forged.Msg.Marshal()
	items = append(items, items[0], forged)

	res := b.c.ConsumeBatch(context.Background(), items)
	require.Len(t, res, len(items))
	type want struct {
		action orderstore.Action
		result string
		reason string
	}
	wants := []want{
		{orderstore.Ack, orderstore.ResultOrderCreated, ""},
		{orderstore.Ack, orderstore.ResultOrderCreated, ""},
		{orderstore.Ack, orderstore.ResultOrderRejected, orderstore.ReasonAlreadyPurchased},
		{orderstore.Ack, orderstore.ResultOrderCreated, ""},
		{orderstore.Ack, orderstore.ResultOrderRejected, orderstore.ReasonStockExhausted},
		{orderstore.Ack, orderstore.ResultOrderCreated, ""}, // items[0] again: the recorded outcome
		{orderstore.Manual, orderstore.ResultManualReview, ""},
	}
	for i, w := range wants {
		got := res[i]
		require.Equal(t, w.action, got.Outcome.Action, "message %d: %v", i, got.Err)
		require.Equal(t, w.result, got.Outcome.Result, "message %d", i)
		require.Equal(t, w.reason, got.Outcome.Reason, "message %d", i)
	}
	require.True(t, res[5].Outcome.Redelivered)
	require.Equal(t, res[0].Outcome.OrderID, res[5].Outcome.OrderID)
	require.ErrorIs(t, res[6].Err, orderstore.ErrPayloadConflict)
	require.Equal(t, stock{3, 0, 3, 0}, b.stock(t))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM orders`))
	require.Equal(t, 5, b.count(t, `SELECT count(*) FROM consumer_inbox`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM compensation_task`))
}

// A message whose statements fail is rolled back to its savepoint — the
// stock it took and the order it wrote included — and the rest of its
// batch commits; run again alone, it is classified as one message always
// was (here: a database error, so Retry, nothing written).
func TestBatchIsolatesAPoisonMessage(t *testing.T) {
	b := setup(t, 10)
	b.c.Batches = &orderstore.BatchCounts{}
	ctx := context.Background()
	// A poison the parser cannot see: the database refuses user 666's order.
	_, err := b.pool.Exec(ctx, `
		CREATE FUNCTION refuse_666() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.user_id = 666 THEN RAISE EXCEPTION 'user 666 refused'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_666 BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION refuse_666();`)
	require.NoError(t, err)

	items := b.batch(t, 1, 666, 2)
	res := b.c.ConsumeBatch(ctx, items)
	require.Equal(t, orderstore.ResultOrderCreated, res[0].Outcome.Result, "%v", res[0].Err)
	require.Equal(t, orderstore.Retry, res[1].Outcome.Action)
	require.ErrorContains(t, res[1].Err, "user 666 refused")
	require.Equal(t, orderstore.ResultOrderCreated, res[2].Outcome.Result, "%v", res[2].Err)
	require.Equal(t, stock{10, 8, 2, 0}, b.stock(t), "the poison's unit is not taken")
	require.Zero(t, b.count(t, `SELECT count(*) FROM consumer_inbox WHERE message_id = $1`, items[1].Msg.MessageID))
	require.Zero(t, b.count(t, `SELECT count(*) FROM inventory_reservation WHERE reservation_id = $1`, items[1].Msg.ReservationID))
	require.EqualValues(t, 1, b.c.Batches.FellBack.Load(), "the set-wise path gave way")
}

// A failing step (here after the orders are inserted) aborts the set-wise
// path with nothing committed; message by message, the message that fails
// again is undone to its savepoint (its order and unit included) and then
// succeeds alone after the batch commits.
func TestBatchRetriesATransientFailureAlone(t *testing.T) {
	b := setup(t, 10)
	var calls atomic.Int32
	flaky := *b.c
	flaky.Batches = &orderstore.BatchCounts{}
	flaky.Failpoint = func(name string) error {
		if name != "after_order_insert" {
			return nil
		}
		if n := calls.Add(1); n == 1 || n == 3 {
			return errors.New("injected failure at " + name)
		}
		return nil
	}
	items := b.batch(t, 1, 2, 3)
	res := flaky.ConsumeBatch(context.Background(), items)
	for i, r := range res {
		require.NoError(t, r.Err, "message %d", i)
		require.Equal(t, orderstore.ResultOrderCreated, r.Outcome.Result, "message %d", i)
	}
	require.Equal(t, stock{10, 7, 3, 0}, b.stock(t))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM orders`))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM inventory_ledger WHERE entry_type = 'OCCUPY'`))
	require.EqualValues(t, 1, flaky.Batches.FellBack.Load())
}

// A crash between the batch's commit and its acknowledgements: every message
// is redelivered and the inbox answers each with the recorded outcome.
func TestBatchCommittedButNotAcknowledged(t *testing.T) {
	b := setup(t, 10)
	crashing := *b.c
	crashing.Failpoint = func(name string) error {
		if name == "after_pg_commit_before_ack" {
			return errors.New("crash after commit")
		}
		return nil
	}
	items := b.batch(t, 1, 2)
	for _, r := range crashing.ConsumeBatch(context.Background(), items) {
		require.Equal(t, orderstore.Retry, r.Outcome.Action, "committed, not acknowledged: redelivered")
	}
	for _, r := range b.c.ConsumeBatch(context.Background(), items) {
		require.Equal(t, orderstore.ResultOrderCreated, r.Outcome.Result)
		require.True(t, r.Outcome.Redelivered)
	}
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM orders`))
}

// The set-wise path: a batch of distinct buyers that sells the last units
// out, with a buyer who already holds an order and a message past its
// deadline — each answered as the one-message transaction would, in one
// commit, the orders that got no unit withdrawn.
func TestBatchSetWiseSellsOut(t *testing.T) {
	b := setup(t, 4)
	b.c.Batches = &orderstore.BatchCounts{}
	ctx := context.Background()
	first := b.batch(t, 1)[0]
	out, err := b.c.Consume(ctx, first.Msg, first.Raw)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)

	items := b.batch(t, 2, 1, 3, 4, 5, 6)
	items[1].Msg.SKUID = sku // user 1 again, another reservation: already purchased
	late := &items[2]
	late.Msg.BusinessDeadline = b.now.Add(-time.Second)
	late.Raw, _ = late.Msg.Marshal()

	res := b.c.ConsumeBatch(ctx, items)
	want := []struct{ result, reason string }{
		{orderstore.ResultOrderCreated, ""},
		{orderstore.ResultOrderRejected, orderstore.ReasonAlreadyPurchased},
		{orderstore.ResultOrderRejected, orderstore.ReasonDeadlineExceeded},
		{orderstore.ResultOrderCreated, ""},
		{orderstore.ResultOrderCreated, ""},
		{orderstore.ResultOrderRejected, orderstore.ReasonStockExhausted},
	}
	for i, w := range want {
		require.NoError(t, res[i].Err, "message %d", i)
		require.Equal(t, orderstore.Ack, res[i].Outcome.Action, "message %d", i)
		require.Equal(t, w.result, res[i].Outcome.Result, "message %d", i)
		require.Equal(t, w.reason, res[i].Outcome.Reason, "message %d", i)
	}
	require.EqualValues(t, 1, b.c.Batches.SetWise.Load())
	require.Zero(t, b.c.Batches.FellBack.Load())
	require.Equal(t, stock{4, 0, 4, 0}, b.stock(t))
	require.Equal(t, 4, b.count(t, `SELECT count(*) FROM orders`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM orders WHERE user_id = 6`), "withdrawn")
	require.Equal(t, 4, b.count(t, `SELECT count(*) FROM inventory_ledger WHERE entry_type = 'OCCUPY'`))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM compensation_task`))
	require.Equal(t, 4, b.count(t, `SELECT count(*) FROM inventory_reservation WHERE status = 'ORDER_CREATED'`))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM inventory_reservation WHERE status = 'ORDER_REJECTED'`))
	require.Equal(t, 7, b.count(t, `SELECT count(*) FROM consumer_inbox WHERE result_code <> 'PROCESSING'`))
	require.Equal(t, 4, b.count(t, `SELECT count(*) FROM event_outbox WHERE event_type = 'ORDER_CANCEL_TIMER'`))

	// The whole batch again (a redelivery): the recorded outcomes, nothing new.
	again := b.c.ConsumeBatch(ctx, items)
	for i, r := range again {
		require.NoError(t, r.Err)
		require.True(t, r.Outcome.Redelivered, "message %d", i)
		require.Equal(t, res[i].Outcome.Result, r.Outcome.Result)
		require.Equal(t, res[i].Outcome.OrderID, r.Outcome.OrderID)
	}
	require.EqualValues(t, 2, b.c.Batches.SetWise.Load())
	require.Equal(t, stock{4, 0, 4, 0}, b.stock(t))
}

// Two SKUs in one batch: each SKU's units are taken once, the rows locked in
// key order.
func TestBatchSetWiseTwoSKUs(t *testing.T) {
	b := setup(t, 2)
	b.c.Batches = &orderstore.BatchCounts{}
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, 1, 1)`, activity, sku-1)
	require.NoError(t, err)
	items := b.batch(t, 1, 2, 3, 4)
	items[1].Msg.SKUID, items[3].Msg.SKUID = sku-1, sku-1
	for i := range items {
		items[i].Raw, _ = items[i].Msg.Marshal()
	}
	res := b.c.ConsumeBatch(ctx, items)
	got := make([]string, len(res))
	for i, r := range res {
		require.NoError(t, r.Err)
		got[i] = r.Outcome.Result + r.Outcome.Reason
	}
	require.Equal(t, []string{"ORDER_CREATED", "ORDER_CREATED", "ORDER_CREATED", "ORDER_REJECTED" + orderstore.ReasonStockExhausted}, got)
	require.EqualValues(t, 1, b.c.Batches.SetWise.Load())
	require.Equal(t, stock{2, 0, 2, 0}, b.stock(t))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM sku_inventory WHERE sku_id = $1 AND available_stock = 0 AND occupied_stock = 1`, sku-1))
}

// Issue 27: the payment window an order gets is the one activity_control
// records (what `seckill activity window -payment-window` and the operator
// write), on the one-message path and on the batch the consumer takes under
// load; the consumer's own setting only serves an activity that records
// none.
func TestPaymentWindowIsTheRecordedOne(t *testing.T) {
	ctx := context.Background()
	b := setup(t, 10)
	window := func(users ...int64) []time.Duration {
		t.Helper()
		rows, err := b.pool.Query(ctx, `SELECT expires_at - created_at FROM orders WHERE user_id = ANY($1) ORDER BY user_id`, users)
		require.NoError(t, err)
		var out []time.Duration
		for rows.Next() {
			var d time.Duration
			require.NoError(t, rows.Scan(&d))
			out = append(out, d.Round(time.Second))
		}
		require.NoError(t, rows.Err())
		return out
	}
	m, raw := b.message(t, 1)
	_, err := b.c.Consume(ctx, m, raw)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{15 * time.Minute}, window(1), "no activity_control row: the consumer's fallback")

	_, err = b.pool.Exec(ctx, `INSERT INTO activity_control (activity_id, window_state, payment_window_ms) VALUES ($1, 'ACTIVE', 120000)`, activity)
	require.NoError(t, err)
	m, raw = b.message(t, 2)
	_, err = b.c.Consume(ctx, m, raw)
	require.NoError(t, err)
	for _, r := range b.c.ConsumeBatch(ctx, b.batch(t, 3, 4, 5, 6)) {
		require.NoError(t, r.Err)
		require.Equal(t, orderstore.ResultOrderCreated, r.Outcome.Result)
	}
	require.Equal(t, []time.Duration{2 * time.Minute, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute}, window(2, 3, 4, 5, 6))
	var timers int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM event_outbox e JOIN orders o ON o.order_id = e.aggregate_id
		WHERE e.event_type = 'ORDER_CANCEL_TIMER' AND e.deliver_at = o.expires_at AND o.user_id = ANY($1)`, []int64{2, 3, 4, 5, 6}).Scan(&timers))
	require.Equal(t, 5, timers, "each cancel timer is due when its order expires")
}
