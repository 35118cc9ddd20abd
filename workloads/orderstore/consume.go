package orderstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/states"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// Action is what the consumer does with the delivery after Consume.
type Action int

const (
	// Ack: the business effect is committed (now or earlier).
	Ack Action = iota
	// Retry: nothing was committed, or the outcome is unknown; redeliver.
	Retry
	// Manual: the message conflicts with what is recorded; quarantine it
	// with its evidence, never acknowledge it as success.
	Manual
)

func (a Action) String() string {
	return [...]string{"ACK", "RETRY", "MANUAL"}[a]
}

// Inbox result codes.
const (
	ResultOrderCreated  = "ORDER_CREATED"
	ResultOrderRejected = "ORDER_REJECTED"
	ResultLateRejected  = "LATE_REJECTED"
	ResultDuplicate     = "DUPLICATE"
	ResultManualReview  = "MANUAL_REVIEW"
	// resultProcessing is an inbox row whose transaction has not decided
	// (inbox/sql/claim.sql writes it; inbox/sql/finish.sql replaces it).
	resultProcessing = "PROCESSING"
)

// Rejection reasons.
const (
	ReasonStockExhausted   = "PG_STOCK_EXHAUSTED"
	ReasonAlreadyPurchased = "ALREADY_PURCHASED"
	ReasonDeadlineExceeded = "BUSINESS_DEADLINE_EXCEEDED"
)

// Errors.
var (
	ErrPayloadConflict = errors.New("same message id with a different payload")
	ErrCommitUnknown   = errors.New("transaction commit outcome unknown")
	ErrStateConflict   = errors.New("reservation state conflicts with the message")
)

// Outcome is the result of one Consume.
type Outcome struct {
	Action Action
	// Result is the inbox result code of this message.
	Result string
	// Reason is the rejection reason, when rejected.
	Reason  string
	OrderID uuid.UUID
	// Redelivered: the inbox already held this message; Result is the
	// outcome recorded the first time.
	Redelivered bool
}

// DefaultPaymentWindow is the payment window of an activity that records
// none (activity_control's column default too).
const DefaultPaymentWindow = 15 * time.Minute

// fallbackWindow is OrderInsert's $7: the window for an activity without an
// activity_control row.
func (c *Consumer) fallbackWindow() string {
	w := c.PaymentWindow
	if w <= 0 {
		w = DefaultPaymentWindow
	}
	return fmt.Sprintf("%d milliseconds", w.Milliseconds())
}

// Consumer runs the order-create transaction.
type Consumer struct {
	Pool  *pgxpool.Pool
	Group string
	// PaymentWindow is how long a new order waits for payment when its
	// activity records no window in activity_control (which is the source of
	// the window: `seckill activity window -payment-window`, the operator's
	// spec.paymentWindow); 0: DefaultPaymentWindow.
	PaymentWindow time.Duration
	// EventsTopic is where the outbox events go (default names.TopicOrderEvents).
	EventsTopic string
	// CancelTopic is where the timeout-cancel timers go (default names.TopicOrderCancel).
	CancelTopic string
	// Now is the clock (injectable for tests).
	Now func() time.Time
	// Failpoint, when set, is called at the named points of design.md#failpoints
	// (after_inbox_insert, after_order_insert, after_pg_stock_decrement,
	// after_pg_commit_before_ack; during_commit_response is a lost answer
	// on the wire, injected by pgproxy); an error it returns aborts the
	// step there. The failpoints build of the binary exits
	// the process instead, like a kill -9.
	Failpoint func(name string) error
	// Batches, when set, counts ConsumeBatch's paths.
	Batches *BatchCounts
}

// BatchCounts tells how many batches committed set-wise and how many fell
// back to the message-by-message path (a conflict, a failing statement, a
// repeated message, reservation or user inside the batch).
type BatchCounts struct{ SetWise, FellBack atomic.Int64 }

func (c *Consumer) countBatch(setWise bool) {
	switch {
	case c.Batches == nil:
	case setWise:
		c.Batches.SetWise.Add(1)
	default:
		c.Batches.FellBack.Add(1)
	}
}

func (c *Consumer) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Consumer) cancelTopic() string {
	if c.CancelTopic != "" {
		return c.CancelTopic
	}
	return names.TopicOrderCancel
}

func (c *Consumer) eventsTopic() string {
	if c.EventsTopic != "" {
		return c.EventsTopic
	}
	return names.TopicOrderEvents
}

func (c *Consumer) fail(name string) error {
	if c.Failpoint == nil {
		return nil
	}
	return c.Failpoint(name)
}

// Consume processes one order-create message exactly once in business
// effect: the order transaction's steps (steps.go) for it alone, in one
// transaction. raw is the message body as received; its hash detects a
// reused id.
// The order and outbox rows carry ctx's span as their trace context.
func (c *Consumer) Consume(ctx context.Context, msg events.OrderCreateRequested, raw []byte) (Outcome, error) {
	return c.consume(ctx, Item{Msg: msg, Raw: raw, Trace: tracing.Traceparent(ctx)})
}

func (c *Consumer) consume(ctx context.Context, it Item) (Outcome, error) {
	hash := sha256.Sum256(it.Raw)
	out, err := c.consumeTx(ctx, it, hash[:])
	if errors.Is(err, errCommit) {
		return c.resolveCommit(ctx, it.Msg, hash[:], err)
	}
	return out, err
}

var errCommit = errors.New("commit failed")

func (c *Consumer) consumeTx(ctx context.Context, it Item, hash []byte) (Outcome, error) {
	tx, err := c.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return Outcome{Action: Retry}, fmt.Errorf("beginning order transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	out, err := c.apply(ctx, tx, it, hash)
	if err != nil {
		return out, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Outcome{Action: Retry}, fmt.Errorf("%w: %w", errCommit, err)
	}
	if err := c.afterCommit(); err != nil {
		return Outcome{Action: Retry}, err
	}
	return out, nil
}

// afterCommit runs the failpoint between a COMMIT and the acknowledgement:
// committed, not acknowledged — the redelivery meets the inbox row. (A
// COMMIT whose answer is lost, design.md#failpoints's during_commit_response, is a
// network fault: pgproxy loses it for real and resolveCommit decides.)
func (c *Consumer) afterCommit() error {
	return c.fail("after_pg_commit_before_ack")
}

// created queues the writes that follow a new order: the reservation CAS,
// the ledger, the ORDER_CREATED event and the timeout-cancel timer (the
// events in the trace of trace, the message's consume span).
func (c *Consumer) created(msg events.OrderCreateRequested, trace string, orderID uuid.UUID, tail *writes) (Outcome, error) {
	event, err := outbox.InsertArgs("ORDER", msg.ReservationID, c.eventsTopic(), events.NewOrderCreated(msg, orderID), trace)
	if err != nil {
		return Outcome{Action: Retry}, err
	}
	timer, err := outbox.TimerArgs(c.cancelTopic(), orderID, events.NewCancelTimer(orderID, msg.ActivityID), trace)
	if err != nil {
		return Outcome{Action: Retry}, err
	}
	tail.add("marking reservation created", onlyOne(msg), qReservationCreated, msg.ReservationID, orderID)
	tail.add("writing ledger", nil, qLedgerOccupy, msg.ActivityID, msg.SKUID, msg.ReservationID, orderID)
	tail.add("writing ORDER_CREATED outbox event", nil, outbox.InsertSQL, event...)
	tail.add("writing the cancel timer", nil, outbox.TimerSQL, timer...)
	return Outcome{Action: Ack, Result: ResultOrderCreated, OrderID: orderID}, nil
}

// lateAndEnforced tells whether msg is past its business deadline with
// deadline rejection in force: while the operator's backlog guard pauses
// it, a late message is still turned into an order if stock allows (
// design.md#backlog).
func (c *Consumer) lateAndEnforced(ctx context.Context, tx pgx.Tx, msg events.OrderCreateRequested) (bool, error) {
	if !c.now().After(msg.BusinessDeadline) {
		return false, nil
	}
	var paused bool
	err := tx.QueryRow(ctx, qControlGet, msg.ActivityID).Scan(&paused)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("reading activity control: %w", err)
	}
	return !paused, nil
}

// reject queues the rejection, its compensation task and the outbox event
// (in the trace of trace).
func (c *Consumer) reject(msg events.OrderCreateRequested, trace string, tail *writes, reason string) (Outcome, error) {
	event, err := outbox.InsertArgs("RESERVATION", msg.ReservationID, c.eventsTopic(), events.NewCompensateRequired(msg, reason), trace)
	if err != nil {
		return Outcome{Action: Retry}, err
	}
	tail.add("marking reservation rejected", onlyOne(msg), qReservationRejected, msg.ReservationID, reason)
	tail.add("writing compensation task", nil, qCompensationInsert, ids.NewRandom(), msg.ReservationID, trace)
	tail.add("writing rejection outbox event", nil, outbox.InsertSQL, event...)
	return Outcome{Action: Ack, Result: ResultOrderRejected, Reason: reason}, nil
}

// reservationRow is the locked PostgreSQL trace of a reservation.
type reservationRow struct {
	status              states.ReservationStatus
	orderID             *uuid.UUID
	message             uuid.UUID
	user, activity, sku int64
}

// decided is the outcome for a message whose reservation is no longer
// RESERVED — decided by another message id, or frozen — the same on every
// path (decided false: RESERVED, this message decides).
func decided(status states.ReservationStatus, orderID *uuid.UUID) (Outcome, bool) {
	switch {
	case status == states.ReservationReserved:
		return Outcome{}, false
	case status.HasOrder() && status != states.ReservationCancelled:
		// Another message id for the same reservation already made the order.
		return Outcome{Action: Ack, Result: ResultDuplicate, OrderID: deref(orderID)}, true
	case status.Rejected() || status == states.ReservationCancelled:
		// A persisted rejection (or a cancelled order) stands: no order, no
		// second compensation (design.md#late-messages).
		return Outcome{Action: Ack, Result: ResultLateRejected}, true
	default: // MANUAL_REVIEW: frozen; record the message, decide nothing.
		return Outcome{Action: Ack, Result: ResultManualReview}, true
	}
}

// matches tells whether the row was recorded for this message and user.
func (r reservationRow) matches(msg events.OrderCreateRequested) bool {
	return r.message == msg.MessageID && r.user == msg.UserID && r.activity == msg.ActivityID && r.sku == msg.SKUID
}

// lockReservation records the reservation if it is new and locks its row;
// the upsert and the lock go in one round trip.
func (c *Consumer) lockReservation(ctx context.Context, tx pgx.Tx, msg events.OrderCreateRequested) (r reservationRow, err error) {
	br := tx.SendBatch(ctx, &pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{
		{SQL: qReservationUpsert, Arguments: []any{msg.ReservationID, msg.RequestID, msg.ActivityID, msg.SKUID,
			msg.UserID, msg.MessageID, msg.ReservedAt, msg.BusinessDeadline, msg.Bucket}},
		{SQL: qReservationLock, Arguments: []any{msg.ReservationID}},
	}})
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("locking reservation: %w", cerr)
		}
	}()
	if _, err := br.Exec(); err != nil {
		return r, fmt.Errorf("upserting reservation: %w", err)
	}
	if err := br.QueryRow().Scan(&r.status, &r.orderID, &r.message, &r.user, &r.activity, &r.sku); err != nil {
		return r, fmt.Errorf("locking reservation: %w", err)
	}
	return r, nil
}

// onlyOne checks that a reservation CAS under the row lock moved exactly the
// locked row.
func onlyOne(msg events.OrderCreateRequested) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%w: reservation %s left RESERVED under lock", ErrStateConflict, msg.ReservationID)
		}
		return nil
	}
}

// writes are a message's last statements, whose results decide nothing
// but their own success: they are sent in one round trip (a pipeline) and
// checked in order.
type writes struct {
	batch pgx.Batch
	what  []string
	check []func(pgconn.CommandTag) error
}

func (w *writes) add(what string, check func(pgconn.CommandTag) error, sql string, args ...any) {
	w.batch.Queue(sql, args...)
	w.what = append(w.what, what)
	w.check = append(w.check, check)
}

func (w *writes) run(ctx context.Context, tx pgx.Tx) (err error) {
	if len(w.what) == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, &w.batch)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%s: %w", w.what[len(w.what)-1], cerr)
		}
	}()
	for i, what := range w.what {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if w.check[i] != nil {
			if err := w.check[i](tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveCommit decides an unknown commit by reading, on a fresh
// connection, what the message's transaction left (design.md#commit-unknown):
//   - nothing: not committed (RETRY; the same id redoes it);
//   - its inbox row with the same hash, and the rest of the transaction
//     with it (an ORDER_CREATED's order, OCCUPY ledger entry and reservation
//     state; an ORDER_REJECTED's reservation state and compensation task):
//     committed (ACK);
//   - the inbox row without its outcome, or without the rest: a commit that
//     left half a transaction — MANUAL (quarantined with the evidence,
//     never acknowledged as success, never compensated);
//   - another hash under the id: a payload conflict (MANUAL);
//   - unreadable (PostgreSQL unreachable): still unknown (RETRY, never
//     compensated; the redelivery meets the inbox row or redoes it).
func (c *Consumer) resolveCommit(ctx context.Context, msg events.OrderCreateRequested, hash []byte, commitErr error) (Outcome, error) {
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	var v committed
	err := c.Pool.QueryRow(vctx, qCommitVerify, c.Group, msg.MessageID).Scan(&v.hash, &v.result, &v.orderID,
		&v.order, &v.ledger, &v.reservation, &v.compensation)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Outcome{Action: Retry}, fmt.Errorf("%w (not committed): %w", ErrCommitUnknown, commitErr)
	case err != nil:
		return Outcome{Action: Retry}, fmt.Errorf("%w (verification failed: %w): %w", ErrCommitUnknown, err, commitErr)
	case !bytes.Equal(v.hash, hash):
		return Outcome{Action: Manual, Result: ResultManualReview}, fmt.Errorf("%w: message %s", ErrPayloadConflict, msg.MessageID)
	}
	if missing := v.incomplete(); missing != "" {
		return Outcome{Action: Manual, Result: ResultManualReview}, fmt.Errorf("%w: the inbox row of %s is committed (%s) but %s",
			ErrStateConflict, msg.MessageID, v.result, missing)
	}
	return Outcome{Action: Ack, Result: v.result, OrderID: deref(v.orderID)}, nil
}

// committed is what commit_verify.sql read of a message's transaction.
type committed struct {
	hash                        []byte
	result                      string
	reservation                 states.ReservationStatus
	orderID                     *uuid.UUID
	order, ledger, compensation bool
}

// incomplete names what a committed inbox row lacks of its transaction
// ("" when it is whole).
func (v committed) incomplete() string {
	switch v.result {
	case resultProcessing:
		return "without its outcome"
	case ResultOrderCreated:
		switch {
		case !v.order:
			return "its order is missing"
		case !v.ledger:
			return "its ledger entry is missing"
		case !v.reservation.HasOrder():
			return "its reservation is " + string(v.reservation)
		}
	case ResultOrderRejected:
		switch {
		case !v.reservation.Rejected():
			return "its reservation is " + string(v.reservation)
		case !v.compensation:
			return "its compensation task is missing"
		}
	}
	return ""
}

func deref(id *uuid.UUID) uuid.UUID {
	if id == nil {
		return uuid.Nil
	}
	return *id
}

func nullable(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}
