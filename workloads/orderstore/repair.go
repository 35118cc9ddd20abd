package orderstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/states"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// Execer is a pool or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// EnsureCompensationTask writes the compensation task of a rejected
// reservation if it is missing (the same idempotency key the rejection
// uses), and reports whether this call wrote it.
func EnsureCompensationTask(ctx context.Context, db Execer, reservationID uuid.UUID) (bool, error) {
	tag, err := db.Exec(ctx, qCompensationInsert, ids.NewRandom(), reservationID, tracing.Traceparent(ctx))
	if err != nil {
		return false, fmt.Errorf("writing the compensation task of %s: %w", reservationID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RejectTimedOut persists the deadline rejection of a reservation whose
// order-create message never reached PostgreSQL before its hard deadline
// (design.md#reconcile persist_timeout_rejection_with_cas): the same reservation row,
// rejection, compensation task and ORDER_REJECTED event the consumer would
// write, under the same lock. No inbox row: when the message arrives later,
// the consumer meets the persisted rejection and answers LATE_REJECTED. A
// reservation PostgreSQL already decided is left as it is (Result names it).
func (c *Consumer) RejectTimedOut(ctx context.Context, msg events.OrderCreateRequested) (Outcome, error) {
	var out Outcome
	err := pgx.BeginTxFunc(ctx, c.Pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var paused bool
		err := tx.QueryRow(ctx, qControlGet, msg.ActivityID).Scan(&paused)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("reading activity control: %w", err)
		}
		if paused {
			out = Outcome{Action: Retry, Result: "COMPENSATION_PAUSED"}
			return nil
		}
		row, err := c.lockReservation(ctx, tx, msg)
		if err != nil {
			return err
		}
		if !row.matches(msg) {
			return fmt.Errorf("%w: reservation %s is recorded for another message or user", ErrStateConflict, msg.ReservationID)
		}
		if row.status != states.ReservationReserved {
			out = Outcome{Action: Ack, Result: "ALREADY_" + string(row.status), OrderID: deref(row.orderID)}
			return nil
		}
		var tail writes
		rejected, err := c.reject(msg, tracing.Traceparent(ctx), &tail, ReasonDeadlineExceeded)
		if err != nil {
			return err
		}
		if err := tail.run(ctx, tx); err != nil {
			return err
		}
		out = rejected
		return nil
	})
	return out, err
}
