package orderstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/names"
)

// errNotFast: the batch holds something the set-wise path does not decide
// (a conflict to quarantine, a row recorded for another message); nothing
// of it is committed and the batch is run message by message instead.
var errNotFast = errors.New("batch needs the message-by-message path")

// distinct tells whether no message id, reservation or user appears twice
// in items (the set-wise path's statements then never meet each other).
func distinct(items []Item) bool {
	msgs := make(map[uuid.UUID]bool, len(items))
	res := make(map[uuid.UUID]bool, len(items))
	type buyer struct{ activity, sku, user int64 }
	buyers := make(map[buyer]bool, len(items))
	for _, it := range items {
		b := buyer{it.Msg.ActivityID, it.Msg.SKUID, it.Msg.UserID}
		if msgs[it.Msg.MessageID] || res[it.Msg.ReservationID] || buyers[b] {
			return false
		}
		msgs[it.Msg.MessageID], res[it.Msg.ReservationID], buyers[b] = true, true, true
	}
	return true
}

// fastItem is one message's progress through batchFast.
type fastItem struct {
	msg     events.OrderCreateRequested
	hash    []byte
	fresh   bool // this transaction inserted its inbox row
	decided bool // out is final
	out     Outcome
	orderID uuid.UUID // inserted, waiting for its unit
}

// batchFast is the batch transaction done statement-set by statement-set,
// each set one pipelined round trip for the whole batch, with the hot SKU
// row locked only at the end:
//
//  1. the inbox rows (inbox first, seed §9.2);
//  2. each reservation recorded and locked, or a redelivery's recorded
//     outcome read;
//  3. the orders of the reservations still RESERVED (one per user);
//  4. per SKU, in key order: lock the row, take the units the new orders
//     need in one update (fewer when fewer are left);
//  5. the rest: reservation CAS, ledger, outbox, timers, rejections (an
//     order whose unit did not come is withdrawn and rejected as stock
//     exhausted), the inbox rows finished;
//  6. commit.
//
// Each message gets the outcome the one-message transaction would give it.
// Anything that would not be a plain outcome (a payload or state conflict,
// a failing statement) returns an error before the commit with nothing
// committed: errNotFast, or the statement's error; an error wrapping
// errCommit means the commit's outcome is unknown.
func (c *Consumer) batchFast(ctx context.Context, items []Item, hashes [][]byte) ([]Result, error) {
	fi := make([]*fastItem, len(items))
	for i, it := range items {
		fi[i] = &fastItem{msg: it.Msg, hash: hashes[i]}
	}
	tx, err := c.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("beginning order batch: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if err := c.claimInbox(ctx, tx, fi); err != nil {
		return nil, err
	}
	if err := c.fail("after_inbox_insert"); err != nil {
		return nil, err
	}
	if err := c.readReservations(ctx, tx, fi); err != nil {
		return nil, err
	}
	var tail writes
	if err := c.insertOrders(ctx, tx, fi, &tail); err != nil {
		return nil, err
	}
	if err := c.fail("after_order_insert"); err != nil {
		return nil, err
	}
	if err := c.takeStock(ctx, tx, fi, &tail); err != nil {
		return nil, err
	}
	if err := c.fail("after_pg_stock_decrement"); err != nil {
		return nil, err
	}
	for _, f := range fi {
		if f.fresh {
			tail.add("finishing inbox row", nil, qInboxFinish, c.Group, f.msg.MessageID, f.out.Result, nullable(f.out.OrderID))
		}
	}
	if err := tail.run(ctx, tx); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", errCommit, err)
	}
	res := make([]Result, len(fi))
	after := c.afterCommit()
	if errors.Is(after, errCommit) {
		return nil, after
	}
	for i, f := range fi {
		res[i] = Result{Outcome: f.out}
		if after != nil {
			res[i] = Result{Outcome: Outcome{Action: Retry}, Err: after}
		}
	}
	return res, nil
}

// claimInbox inserts every message's inbox row; a row that exists marks a
// redelivery.
func (c *Consumer) claimInbox(ctx context.Context, tx pgx.Tx, fi []*fastItem) (err error) {
	var b pgx.Batch
	for _, f := range fi {
		m := f.msg
		b.Queue(qInboxInsert, c.Group, m.MessageID, names.TopicOrderCreate, m.EventType, m.ReservationID, m.RequestID, f.hash)
	}
	br := tx.SendBatch(ctx, &b)
	defer closeBatch(br, &err)
	for _, f := range fi {
		var owned uuid.UUID
		err := br.QueryRow().Scan(&owned)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("inserting inbox row: %w", err)
		default:
			f.fresh = true
		}
	}
	return nil
}

// readReservations records and locks each fresh message's reservation and
// reads each redelivery's recorded outcome; it decides every message that
// needs no order.
func (c *Consumer) readReservations(ctx context.Context, tx pgx.Tx, fi []*fastItem) (err error) {
	var b pgx.Batch
	for _, f := range fi {
		m := f.msg
		if !f.fresh {
			b.Queue(qInboxGet, c.Group, m.MessageID)
			continue
		}
		b.Queue(qReservationUpsert, m.ReservationID, m.RequestID, m.ActivityID, m.SKUID,
			m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline, m.Bucket)
		b.Queue(qReservationLock, m.ReservationID)
	}
	br := tx.SendBatch(ctx, &b)
	defer closeBatch(br, &err)
	for _, f := range fi {
		if !f.fresh {
			var prior []byte
			var result string
			var orderID *uuid.UUID
			if err := br.QueryRow().Scan(&prior, &result, &orderID); err != nil {
				return fmt.Errorf("reading inbox row: %w", err)
			}
			if string(prior) != string(f.hash) || result == "PROCESSING" {
				return errNotFast
			}
			f.decided, f.out = true, Outcome{Action: Ack, Result: result, OrderID: deref(orderID), Redelivered: true}
			continue
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("upserting reservation: %w", err)
		}
		var r reservationRow
		if err := br.QueryRow().Scan(&r.status, &r.orderID, &r.message, &r.user, &r.activity, &r.sku); err != nil {
			return fmt.Errorf("locking reservation: %w", err)
		}
		if !r.matches(f.msg) {
			return errNotFast
		}
		switch r.status {
		case "RESERVED":
		case "ORDER_CREATED":
			f.decided, f.out = true, Outcome{Action: Ack, Result: ResultDuplicate, OrderID: deref(r.orderID)}
		case "ORDER_REJECTED", "COMPENSATING", "COMPENSATED", "CANCELLED":
			f.decided, f.out = true, Outcome{Action: Ack, Result: ResultLateRejected}
		default:
			f.decided, f.out = true, Outcome{Action: Ack, Result: ResultManualReview}
		}
	}
	return nil
}

// insertOrders rejects the late messages (deadline rejection in force) and
// inserts an order for every other RESERVED one; a user who already holds
// an order is rejected.
func (c *Consumer) insertOrders(ctx context.Context, tx pgx.Tx, fi []*fastItem, tail *writes) (err error) {
	window := fmt.Sprintf("%d milliseconds", c.PaymentWindow.Milliseconds())
	var b pgx.Batch
	var want []*fastItem
	for _, f := range fi {
		if f.decided {
			continue
		}
		late, err := c.lateAndEnforced(ctx, tx, f.msg)
		if err != nil {
			return err
		}
		if late {
			f.decided = true
			f.out, _ = c.reject(f.msg, tail, ReasonDeadlineExceeded)
			continue
		}
		f.orderID = ids.NewRandom()
		m := f.msg
		b.Queue(qOrderInsert, f.orderID, m.ActivityID, m.SKUID, m.UserID, m.RequestID, m.ReservationID, window)
		want = append(want, f)
	}
	if len(want) == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, &b)
	defer closeBatch(br, &err)
	for _, f := range want {
		var inserted uuid.UUID
		err := br.QueryRow().Scan(&inserted)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			f.decided, f.orderID = true, uuid.Nil
			f.out, _ = c.reject(f.msg, tail, ReasonAlreadyPurchased)
		case err != nil:
			return fmt.Errorf("inserting order: %w", err)
		}
	}
	return nil
}

// takeStock takes, per SKU in key order (two batches never wait on each
// other's rows in opposite order), the units the batch's new orders need:
// the first orders in batch order get them; the others are withdrawn and
// rejected as stock exhausted.
func (c *Consumer) takeStock(ctx context.Context, tx pgx.Tx, fi []*fastItem, tail *writes) error {
	type key struct{ activity, sku int64 }
	bySKU := map[key][]*fastItem{}
	var keys []key
	for _, f := range fi {
		if f.decided {
			continue
		}
		k := key{f.msg.ActivityID, f.msg.SKUID}
		if bySKU[k] == nil {
			keys = append(keys, k)
		}
		bySKU[k] = append(bySKU[k], f)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.activity, b.activity), cmp.Compare(a.sku, b.sku))
	})
	for _, k := range keys {
		want := bySKU[k]
		var left int64
		err := tx.QueryRow(ctx, qStockLock, k.activity, k.sku).Scan(&left)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("locking stock: %w", err)
		}
		n := min(left, int64(len(want)))
		if n > 0 {
			if err := tx.QueryRow(ctx, qStockOccupyMany, k.activity, k.sku, n).Scan(&left); err != nil {
				return fmt.Errorf("occupying %d units of stock: %w", n, err)
			}
		}
		for i, f := range want {
			f.decided = true
			if int64(i) < n {
				f.out = c.created(f.msg, f.orderID, tail)
				continue
			}
			tail.add("withdrawing an order without stock", onlyOneOrder, qOrderWithdraw, f.orderID)
			f.out, _ = c.reject(f.msg, tail, ReasonStockExhausted)
		}
	}
	return nil
}

func onlyOneOrder(tag pgconn.CommandTag) error {
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: an order of this batch was not found to withdraw", ErrStateConflict)
	}
	return nil
}

func closeBatch(br pgx.BatchResults, err *error) {
	if cerr := br.Close(); *err == nil && cerr != nil {
		*err = fmt.Errorf("closing the pipeline: %w", cerr)
	}
}
