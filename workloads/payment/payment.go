// Package payment applies the payment provider's success callbacks to
// PostgreSQL (design.md#payment-cancel): the payment is recorded once per provider
// transaction, the order moves to PAID by a conditional update, the stock
// from occupied to sold with its ledger row and an ORDER_PAID outbox event,
// all in one transaction. When the update finds no row, the order's state
// decides: already PAID is success, CANCELLED starts the refund flow, an
// unknown order is never created from a callback.
package payment

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

func mustSQL(name string) string { return sqlfile.Must(sqlFiles, name) }

var (
	qOrderLock        = sqlfile.Must(sqlFiles, "order_lock")
	qPaymentInsert    = sqlfile.Must(sqlFiles, "payment_insert")
	qPaymentGet       = sqlfile.Must(sqlFiles, "payment_get")
	qOrderPaid        = sqlfile.Must(sqlFiles, "order_paid")
	qStockSell        = sqlfile.Must(sqlFiles, "stock_sell")
	qLedgerSell       = sqlfile.Must(sqlFiles, "ledger_sell")
	qPaymentRefunding = sqlfile.Must(sqlFiles, "payment_refunding")
)

// Results of applying a callback.
const (
	ResultPaid            = "PAID"              // this callback paid the order
	ResultAlreadyPaid     = "ALREADY_PAID"      // idempotent success
	ResultPaidAfterCancel = "PAID_AFTER_CANCEL" // the order was cancelled: refund flow
	ResultRefund          = "REFUND_IN_PROGRESS"
	ResultUnknownOrder    = "UNKNOWN_ORDER" // quarantined, looked up again later
)

// Errors.
var (
	// ErrConflict: the callback contradicts what is recorded (another order
	// or amount for the same provider transaction, a wrong amount).
	ErrConflict = errors.New("payment callback conflicts with the recorded payment or order")
	// ErrUnknownOrder: no such order (yet); nothing was written.
	ErrUnknownOrder = errors.New("payment callback for an unknown order")
)

// Callback is one success report of the provider.
type Callback struct {
	Provider      string
	TransactionID string
	OrderID       uuid.UUID
	AmountCents   int64
	Currency      string
	PaidAt        time.Time
}

// namespace of the payment ids (UUIDv5 of provider and transaction).
var namespace = uuid.MustParse("6f1d4f52-3c1e-4c4e-9a55-1b1c5d0e7a10")

// PaymentID is the stable id of a provider transaction: every replay of
// the callback maps to the same payment.
func (c Callback) PaymentID() uuid.UUID {
	return uuid.NewSHA1(namespace, []byte(c.Provider+"\x00"+c.TransactionID))
}

// Store applies callbacks.
type Store struct {
	Pool *pgxpool.Pool
	// EventsTopic is where ORDER_PAID goes (default names.TopicOrderEvents).
	EventsTopic string
	// Failpoint, when set, is called at after_payment_record_insert (
	// design.md#failpoints: in the payment transaction, the payment row written, the order
	// not yet moved); an error it returns rolls the transaction back. The
	// failpoints build exits the process there.
	Failpoint func(name string) error
}

func (s *Store) topic() string {
	if s.EventsTopic != "" {
		return s.EventsTopic
	}
	return names.TopicOrderEvents
}

// Apply applies one success callback and returns its result. An unknown
// order returns ErrUnknownOrder and writes nothing.
func (s *Store) Apply(ctx context.Context, cb Callback) (string, error) {
	var result string
	err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		result, err = s.apply(ctx, tx, cb)
		return err
	})
	if err != nil {
		return "", err
	}
	return result, nil
}

func (s *Store) apply(ctx context.Context, tx pgx.Tx, cb Callback) (result string, err error) {
	var (
		status        states.OrderStatus
		currency      string
		amount        int64
		activity, sku int64
		reservationID uuid.UUID
		traceparent   string
	)
	err = tx.QueryRow(ctx, qOrderLock, cb.OrderID).Scan(&status, &amount, &currency, &activity, &sku, &reservationID, &traceparent)
	if errors.Is(err, pgx.ErrNoRows) {
		return ResultUnknownOrder, fmt.Errorf("%w: %s", ErrUnknownOrder, cb.OrderID)
	}
	if err != nil {
		return "", fmt.Errorf("locking order %s: %w", cb.OrderID, err)
	}
	// The payment span joins the order's trace (design.md#traces), linked
	// to the callback's own; the events it writes carry it.
	callback := trace.LinkFromContext(ctx)
	ctx, span := tracing.Start(tracing.FromTraceparent(ctx, traceparent), tracing.SpanPayment, trace.SpanKindInternal,
		tracing.AttrOrder.String(cb.OrderID.String()), tracing.AttrReservation.String(reservationID.String()))
	if callback.SpanContext.IsValid() {
		span.AddLink(callback)
	}
	defer func() {
		span.SetAttributes(tracing.AttrResult.String(result))
		tracing.End(span, err)
	}()
	// What the buyer owes, exactly: an order of 0 (never priced) cannot be
	// paid, and a wrong amount or currency pays nothing.
	if amount <= 0 || cb.AmountCents != amount || cb.Currency != currency {
		return "", fmt.Errorf("%w: order %s costs %d %s, the provider reports %d %s", ErrConflict, cb.OrderID, amount, currency, cb.AmountCents, cb.Currency)
	}
	pid := cb.PaymentID()
	if _, err := tx.Exec(ctx, qPaymentInsert, pid, cb.OrderID, cb.Provider, cb.TransactionID, cb.AmountCents, cb.PaidAt, cb.Currency); err != nil {
		return "", fmt.Errorf("recording payment %s: %w", pid, err)
	}
	if s.Failpoint != nil {
		if err := s.Failpoint("after_payment_record_insert"); err != nil {
			return "", err
		}
	}
	var recID, recOrder uuid.UUID
	var recAmount int64
	var recCurrency, recStatus string
	if err := tx.QueryRow(ctx, qPaymentGet, cb.Provider, cb.TransactionID).Scan(&recID, &recOrder, &recAmount, &recCurrency, &recStatus); err != nil {
		return "", fmt.Errorf("reading payment %s: %w", pid, err)
	}
	if recID != pid || recOrder != cb.OrderID || recAmount != cb.AmountCents || recCurrency != cb.Currency {
		return "", fmt.Errorf("%w: transaction %s/%s is recorded for order %s, %d %s", ErrConflict, cb.Provider, cb.TransactionID, recOrder, recAmount, recCurrency)
	}

	var paid uuid.UUID
	err = tx.QueryRow(ctx, qOrderPaid, cb.OrderID, cb.PaidAt).Scan(&paid)
	switch {
	case err == nil:
		tag, err := tx.Exec(ctx, qStockSell, activity, sku)
		if err != nil {
			return "", fmt.Errorf("moving the stock of order %s to sold: %w", cb.OrderID, err)
		}
		if tag.RowsAffected() != 1 {
			return "", fmt.Errorf("%w: order %s has no occupied unit to sell", ErrConflict, cb.OrderID)
		}
		if _, err := tx.Exec(ctx, qLedgerSell, activity, sku, reservationID, cb.OrderID); err != nil {
			return "", fmt.Errorf("writing the SELL ledger row of order %s: %w", cb.OrderID, err)
		}
		if err := s.event(ctx, tx, events.TypeOrderPaid, cb, activity, sku, reservationID); err != nil {
			return "", err
		}
		return ResultPaid, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("marking order %s paid: %w", cb.OrderID, err)
	}
	// Zero rows: the order's state decides (design.md#payment-cancel).
	switch status {
	case states.OrderPaid:
		return ResultAlreadyPaid, nil
	case states.OrderCancelled:
		var id uuid.UUID
		err := tx.QueryRow(ctx, qPaymentRefunding, pid).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ResultPaidAfterCancel, nil // already in the refund flow
		}
		if err != nil {
			return "", fmt.Errorf("starting the refund of payment %s: %w", pid, err)
		}
		if err := s.event(ctx, tx, events.TypeRefundRequired, cb, activity, sku, reservationID); err != nil {
			return "", err
		}
		return ResultPaidAfterCancel, nil
	case states.OrderRefunding, states.OrderRefunded:
		return ResultRefund, nil
	default:
		return "", fmt.Errorf("%w: order %s is %s", ErrConflict, cb.OrderID, status)
	}
}

func (s *Store) event(ctx context.Context, tx pgx.Tx, typ string, cb Callback, activity, sku int64, reservationID uuid.UUID) error {
	return outbox.Insert(ctx, tx, "ORDER", cb.OrderID, s.topic(), events.Payment{SchemaVersion: 1, EventType: typ,
		OrderID: cb.OrderID, ReservationID: reservationID, ActivityID: activity, SKUID: sku, PaymentID: cb.PaymentID(),
		Provider: cb.Provider, ProviderTransactionID: cb.TransactionID, AmountCents: cb.AmountCents, Currency: cb.Currency,
		PaidAtMs: cb.PaidAt.UnixMilli()})
}
