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
)

// Execer is a pool or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// EnsureCompensationTask writes the compensation task of a rejected
// reservation if it is missing (the same idempotency key the rejection
// uses), and reports whether this call wrote it.
func EnsureCompensationTask(ctx context.Context, db Execer, reservationID uuid.UUID) (bool, error) {
	tag, err := db.Exec(ctx, qCompensationInsert, ids.NewRandom(), reservationID)
	if err != nil {
		return false, fmt.Errorf("writing the compensation task of %s: %w", reservationID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RejectTimedOut persists the deadline rejection of a reservation whose
// order-create message never reached PostgreSQL before its hard deadline
// (seed §13.5 persist_timeout_rejection_with_cas): the same reservation row,
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
		if _, err := tx.Exec(ctx, qReservationUpsert, msg.ReservationID, msg.RequestID, msg.ActivityID, msg.SKUID,
			msg.UserID, msg.MessageID, msg.ReservedAt, msg.BusinessDeadline, msg.Bucket); err != nil {
			return fmt.Errorf("upserting reservation: %w", err)
		}
		var (
			status                       string
			orderID                      *uuid.UUID
			rowMessage                   uuid.UUID
			rowUser, rowActivity, rowSKU int64
		)
		if err := tx.QueryRow(ctx, qReservationLock, msg.ReservationID).Scan(&status, &orderID, &rowMessage, &rowUser, &rowActivity, &rowSKU); err != nil {
			return fmt.Errorf("locking reservation: %w", err)
		}
		if rowMessage != msg.MessageID || rowUser != msg.UserID || rowActivity != msg.ActivityID || rowSKU != msg.SKUID {
			return fmt.Errorf("%w: reservation %s is recorded for another message or user", ErrStateConflict, msg.ReservationID)
		}
		if status != "RESERVED" {
			out = Outcome{Action: Ack, Result: "ALREADY_" + status, OrderID: deref(orderID)}
			return nil
		}
		var err2 error
		out, err2 = c.reject(ctx, tx, msg, ReasonDeadlineExceeded)
		return err2
	})
	return out, err
}
