package orderstore

import (
	"bytes"
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
	"github.com/seckill/seckill-operator/workloads/inbox"
	"github.com/seckill/seckill-operator/workloads/names"
)

// errConflict: a message conflicts with what is recorded (a reused id with
// another payload, a reservation recorded for another message or user, an
// inbox row committed without its outcome); its item's out and err say
// how. Nothing of the transaction may commit: a batch is run message by
// message instead, and the message itself is quarantined (Manual).
var errConflict = errors.New("a message conflicts with what is recorded")

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

// txItem is one message's progress through the order transaction's steps.
type txItem struct {
	msg     events.OrderCreateRequested
	trace   string // the consume span's W3C context (Item.Trace)
	hash    []byte
	fresh   bool // this transaction inserted its inbox row
	decided bool // out is final
	out     Outcome
	err     error     // a conflict (errConflict): out is Manual
	orderID uuid.UUID // inserted, waiting for its unit
}

// apply is the order transaction of one message in tx (its own
// transaction, or its savepoint in a batch): steps with one item.
func (c *Consumer) apply(ctx context.Context, tx pgx.Tx, it Item, hash []byte) (Outcome, error) {
	f := &txItem{msg: it.Msg, trace: it.Trace, hash: hash}
	if err := c.steps(ctx, tx, []*txItem{f}); err != nil {
		if errors.Is(err, errConflict) {
			return f.out, f.err
		}
		return Outcome{Action: Retry}, err
	}
	return f.out, nil
}

// batchFast is the set-wise path: every message of a batch (distinct ids,
// reservations and users) through steps in one transaction, committed.
// An error wrapping errCommit means the commit's outcome is unknown; any
// other error means nothing is committed.
func (c *Consumer) batchFast(ctx context.Context, items []Item, hashes [][]byte) ([]Result, error) {
	fi := make([]*txItem, len(items))
	for i, it := range items {
		fi[i] = &txItem{msg: it.Msg, trace: it.Trace, hash: hashes[i]}
	}
	tx, err := c.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("beginning order batch: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := c.steps(ctx, tx, fi); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", errCommit, err)
	}
	res := make([]Result, len(fi))
	after := c.afterCommit()
	for i, f := range fi {
		res[i] = Result{Outcome: f.out}
		if after != nil {
			res[i] = Result{Outcome: Outcome{Action: Retry}, Err: after}
		}
	}
	return res, nil
}

// steps is the order transaction (design.md#order-transaction), the one
// implementation every path runs — one message alone (apply), one under
// its savepoint in a batch, or a whole batch set-wise (batchFast). It runs
// statement-set by statement-set, each set one pipelined round trip for
// all of fi, with the hot SKU row locked only at the end:
//
//  1. the inbox rows (inbox first, design.md#inbox);
//  2. each reservation recorded and locked, or a redelivery's recorded
//     outcome read;
//  3. the orders of the reservations still RESERVED (one per user);
//  4. the rejections decided so far;
//  5. in one pipeline after a savepoint: every new order's writes
//     (reservation CAS, ledger, outbox, timer), the inbox rows finished,
//     and last, per SKU in key order, one update taking all the units the
//     batch needs — the hot row is locked only from that update to the
//     commit (takeStockLast);
//  6. only when a SKU has fewer units left: back to the savepoint; per SKU
//     lock the row, take what is left, the orders without a unit withdrawn
//     and rejected as stock exhausted (takeStock), the inbox rows finished;
//  7. commit.
//
// Each message gets the outcome of the rules (decided, created, reject);
// one that conflicts with what is recorded stops the steps with
// errConflict. A statement's error is returned as it is. Either way
// nothing of tx may be committed. The failpoints of design.md#failpoints
// fire at their steps, so each names one state on every path.
func (c *Consumer) steps(ctx context.Context, tx pgx.Tx, fi []*txItem) error {
	if err := c.claimInbox(ctx, tx, fi); err != nil {
		return err
	}
	if err := c.fail("after_inbox_insert"); err != nil {
		return err
	}
	if err := c.readReservations(ctx, tx, fi); err != nil {
		return err
	}
	var tail writes
	if err := c.insertOrders(ctx, tx, fi, &tail); err != nil {
		return err
	}
	if err := c.fail("after_order_insert"); err != nil {
		return err
	}
	if err := tail.run(ctx, tx); err != nil { // the outcomes decided so far
		return err
	}
	took, err := c.takeStockLast(ctx, tx, fi)
	if err != nil {
		return err
	}
	if !took { // fewer units left than new orders: lock, split, withdraw
		var rest writes
		if err := c.takeStock(ctx, tx, fi, &rest); err != nil {
			return err
		}
		c.finishInbox(fi, &rest)
		if err := rest.run(ctx, tx); err != nil {
			return err
		}
	}
	// Every statement has run; the COMMIT is next.
	return c.fail("after_pg_stock_decrement")
}

// claimInbox inserts every message's inbox row; a row that exists marks a
// redelivery.
func (c *Consumer) claimInbox(ctx context.Context, tx pgx.Tx, fi []*txItem) (err error) {
	var b pgx.Batch
	for _, f := range fi {
		m := f.msg
		b.Queue(inbox.ClaimSQL, c.Group, m.MessageID, names.TopicOrderCreate, m.EventType, m.ReservationID, m.RequestID, f.hash)
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
// needs no order, and stops with errConflict at one that conflicts.
func (c *Consumer) readReservations(ctx context.Context, tx pgx.Tx, fi []*txItem) (err error) {
	var b pgx.Batch
	for _, f := range fi {
		m := f.msg
		if !f.fresh {
			b.Queue(inbox.GetSQL, c.Group, m.MessageID)
			continue
		}
		b.Queue(qReservationUpsert, m.ReservationID, m.RequestID, m.ActivityID, m.SKUID,
			m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline, m.Bucket)
		b.Queue(qReservationLock, m.ReservationID)
	}
	br := tx.SendBatch(ctx, &b)
	defer closeBatch(br, &err)
	for _, f := range fi {
		m := f.msg
		if !f.fresh {
			var prior []byte
			var result string
			var orderID *uuid.UUID
			if err := br.QueryRow().Scan(&prior, &result, &orderID); err != nil {
				return fmt.Errorf("reading inbox row: %w", err)
			}
			switch {
			case !bytes.Equal(prior, f.hash):
				return f.conflict(fmt.Errorf("%w: message %s", ErrPayloadConflict, m.MessageID))
			case result == resultProcessing:
				// Committed without its outcome: half a transaction
				// (design.md#commit-unknown), for a person.
				return f.conflict(fmt.Errorf("%w: the inbox row of %s is committed without its outcome", ErrStateConflict, m.MessageID))
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
		if !r.matches(m) {
			return f.conflict(fmt.Errorf("%w: reservation %s is recorded for another message or user", ErrStateConflict, m.ReservationID))
		}
		f.out, f.decided = decided(r.status, r.orderID)
	}
	return nil
}

// insertOrders rejects the late messages (deadline rejection in force) and
// inserts an order for every other RESERVED one; a user who already holds
// an order is rejected.
func (c *Consumer) insertOrders(ctx context.Context, tx pgx.Tx, fi []*txItem, tail *writes) (err error) {
	window := c.fallbackWindow()
	var b pgx.Batch
	var want []*txItem
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
			if f.out, err = c.reject(f.msg, f.trace, tail, ReasonDeadlineExceeded); err != nil {
				return err
			}
			continue
		}
		f.orderID = ids.NewRandom()
		m := f.msg
		b.Queue(qOrderInsert, f.orderID, m.ActivityID, m.SKUID, m.UserID, m.RequestID, m.ReservationID, window, f.trace)
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
			if f.out, err = c.reject(f.msg, f.trace, tail, ReasonAlreadyPurchased); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("inserting order: %w", err)
		}
	}
	return nil
}

// Savepoint statements of takeStockLast.
const (
	sqlSavepoint  = "SAVEPOINT stock_last"
	sqlRollbackSP = "ROLLBACK TO SAVEPOINT stock_last"
)

// stockGroups lists the undecided new orders per SKU, the SKUs in key order
// (two batches never wait on each other's rows in opposite order).
func stockGroups(fi []*txItem) ([]stockKey, map[stockKey][]*txItem) {
	bySKU := map[stockKey][]*txItem{}
	var keys []stockKey
	for _, f := range fi {
		if f.decided {
			continue
		}
		k := stockKey{f.msg.ActivityID, f.msg.SKUID}
		if bySKU[k] == nil {
			keys = append(keys, k)
		}
		bySKU[k] = append(bySKU[k], f)
	}
	slices.SortFunc(keys, func(a, b stockKey) int {
		return cmp.Or(cmp.Compare(a.activity, b.activity), cmp.Compare(a.sku, b.sku))
	})
	return keys, bySKU
}

type stockKey struct{ activity, sku int64 }

// finishInbox adds the inbox rows' outcomes to w.
func (c *Consumer) finishInbox(fi []*txItem, w *writes) {
	for _, f := range fi {
		if f.fresh {
			w.add("finishing inbox row", nil, inbox.FinishSQL, c.Group, f.msg.MessageID, f.out.Result, nullable(f.out.OrderID))
		}
	}
}

// takeStockLast writes, after a savepoint, every new order as created and
// the inbox rows finished, then takes each SKU's units in one update
// per SKU: one pipeline, the hot row locked from that update to the
// commit. false (and the savepoint rolled back, the new orders undecided)
// when a SKU has fewer units left than the batch needs.
func (c *Consumer) takeStockLast(ctx context.Context, tx pgx.Tx, fi []*txItem) (bool, error) {
	keys, bySKU := stockGroups(fi)
	var w writes
	w.add("setting a savepoint", nil, sqlSavepoint)
	for _, k := range keys {
		for _, f := range bySKU[k] {
			var err error
			if f.out, err = c.created(f.msg, f.trace, f.orderID, &w); err != nil {
				return false, err
			}
		}
	}
	c.finishInbox(fi, &w)
	short := false
	for _, k := range keys {
		w.add("taking stock", func(tag pgconn.CommandTag) error {
			short = short || tag.RowsAffected() == 0
			return nil
		}, qStockOccupyMany, k.activity, k.sku, len(bySKU[k]))
	}
	if err := w.run(ctx, tx); err != nil {
		return false, err
	}
	if short {
		if _, err := tx.Exec(ctx, sqlRollbackSP); err != nil {
			return false, fmt.Errorf("rolling back to the savepoint: %w", err)
		}
		for _, k := range keys {
			for _, f := range bySKU[k] {
				f.out = Outcome{}
			}
		}
		return false, nil
	}
	for _, k := range keys {
		for _, f := range bySKU[k] {
			f.decided = true
		}
	}
	return true, nil
}

// takeStock takes, per SKU in key order (two batches never wait on each
// other's rows in opposite order), the units the batch's new orders need:
// the first orders in batch order get them; the others are withdrawn and
// rejected as stock exhausted.
func (c *Consumer) takeStock(ctx context.Context, tx pgx.Tx, fi []*txItem, tail *writes) error {
	keys, bySKU := stockGroups(fi)
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
			var err error
			if int64(i) < n {
				if f.out, err = c.created(f.msg, f.trace, f.orderID, tail); err != nil {
					return err
				}
				continue
			}
			tail.add("withdrawing an order without stock", onlyOneOrder, qOrderWithdraw, f.orderID)
			if f.out, err = c.reject(f.msg, f.trace, tail, ReasonStockExhausted); err != nil {
				return err
			}
		}
	}
	return nil
}

// conflict stops the steps at f: quarantined with err, nothing committed.
func (f *txItem) conflict(err error) error {
	f.decided, f.out, f.err = true, Outcome{Action: Manual, Result: ResultManualReview}, err
	return errConflict
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
