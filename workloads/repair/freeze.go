package repair

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
)

// Rules of the freeze.
const (
	RuleFreeze   = "FREEZE"
	RuleUnfreeze = "UNFREEZE"
)

// StatusFrozen is the reservation status of a frozen reservation.
const StatusFrozen = states.ReservationManualReview

// Freeze is design.md#runbook step 1 for a reservation: its status becomes
// MANUAL_REVIEW (the state it had is remembered), its unfinished
// compensation tasks become MANUAL, and with it the automatic actions stop:
// the compensator claims no MANUAL task, the canceller keeps the order's
// timer waiting, the order consumer (a replayed message included) records
// the message and decides nothing, the reconcile job only reports it. One
// transaction; the freeze is itself an audited repair task. A reservation
// already frozen returns ErrFrozen.
func (s *Store) Freeze(ctx context.Context, reservationID uuid.UUID, a Audit, evidence map[string]any, runID *uuid.UUID) (Task, error) {
	if a.Operator == "" || a.Reason == "" {
		return Task{}, fmt.Errorf("%w: freezing needs an operator and a reason", ErrNoAuditTrail)
	}
	var t Task
	err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var status states.ReservationStatus
		var version, activity int64
		var order *uuid.UUID
		err := tx.QueryRow(ctx, qResLock, reservationID).Scan(&status, &version, &activity, &order)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("freezing %s: %w", reservationID, pgx.ErrNoRows)
		}
		if err != nil {
			return fmt.Errorf("locking reservation %s: %w", reservationID, err)
		}
		if status == StatusFrozen {
			return fmt.Errorf("%w: %s", ErrFrozen, reservationID)
		}
		t = New(activity, ObjectReservation, reservationID.String(), RuleFreeze, version, string(StatusFrozen))
		t.Automatic = runID != nil // frozen by a reconcile run
		t.Operator, t.Approver, t.Reason, t.Incident, t.RunID = a.Operator, a.Approver, a.Reason, a.Incident, runID
		if evidence != nil {
			t.Evidence = evidence
		}
		t.Before = map[string]any{"reservation_status": string(status), "version": version, "order_id": order}
		ok, err := s.claim(ctx, tx, &t)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: freeze %s already recorded", ErrFrozen, t.IDHex)
		}
		var newVersion int64
		if err := tx.QueryRow(ctx, qFreeze, reservationID, t.ID).Scan(&newVersion); err != nil {
			return fmt.Errorf("freezing reservation %s: %w", reservationID, err)
		}
		rows, err := tx.Query(ctx, qFreezeTasks, reservationID)
		if err != nil {
			return fmt.Errorf("stopping the compensation tasks of %s: %w", reservationID, err)
		}
		tasks, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("stopping the compensation tasks of %s: %w", reservationID, err)
		}
		t.After = map[string]any{"reservation_status": string(StatusFrozen), "version": newVersion, "compensation_tasks_stopped": tasks}
		t.Via = "repair.Freeze"
		if _, err := tx.Exec(ctx, qTaskDone, t.ID, jsonOf(t.After), t.Via); err != nil {
			return fmt.Errorf("recording the freeze of %s: %w", reservationID, err)
		}
		t.Status = Applied
		return nil
	})
	return t, err
}

// Unfreeze lifts a freeze after the review: the remembered status comes
// back and the compensation tasks the freeze stopped run again. It needs the
// whole audit trail (an approver other than the operator).
func (s *Store) Unfreeze(ctx context.Context, reservationID uuid.UUID, a Audit) (Task, error) {
	if err := a.Check(); err != nil {
		return Task{}, err
	}
	var t Task
	err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var status states.ReservationStatus
		var version, activity int64
		var order *uuid.UUID
		if err := tx.QueryRow(ctx, qResLock, reservationID).Scan(&status, &version, &activity, &order); err != nil {
			return fmt.Errorf("locking reservation %s: %w", reservationID, err)
		}
		if status != StatusFrozen {
			return fmt.Errorf("%w: %s is %s", ErrNotFrozen, reservationID, status)
		}
		var restored string
		var newVersion int64
		if err := tx.QueryRow(ctx, qUnfreeze, reservationID).Scan(&restored, &newVersion); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: %s has no remembered state", ErrNotFrozen, reservationID)
			}
			return fmt.Errorf("lifting the freeze of %s: %w", reservationID, err)
		}
		t = New(activity, ObjectReservation, reservationID.String(), RuleUnfreeze, version, restored)
		t.Operator, t.Approver, t.Reason, t.Incident = a.Operator, a.Approver, a.Reason, a.Incident
		t.Before = map[string]any{"reservation_status": string(status), "version": version}
		ok, err := s.claim(ctx, tx, &t)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: unfreeze %s already recorded", ErrNotFrozen, t.IDHex)
		}
		rows, err := tx.Query(ctx, qUnfreezeTasks, reservationID)
		if err != nil {
			return fmt.Errorf("resuming the compensation tasks of %s: %w", reservationID, err)
		}
		tasks, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("resuming the compensation tasks of %s: %w", reservationID, err)
		}
		t.After = map[string]any{"reservation_status": restored, "version": newVersion, "compensation_tasks_resumed": tasks}
		t.Via = "repair.Unfreeze"
		if _, err := tx.Exec(ctx, qTaskDone, t.ID, jsonOf(t.After), t.Via); err != nil {
			return fmt.Errorf("recording the unfreeze of %s: %w", reservationID, err)
		}
		t.Status = Applied
		return nil
	})
	return t, err
}

var qOrderReservation = sqlfile.Must(sqlFiles, "order_reservation")

// ReservationOfOrder finds an order's reservation (the object a freeze acts on).
func (s *Store) ReservationOfOrder(ctx context.Context, order uuid.UUID) (uuid.UUID, error) {
	var rid uuid.UUID
	err := s.Pool.QueryRow(ctx, qOrderReservation, order).Scan(&rid)
	if errors.Is(err, pgx.ErrNoRows) {
		return rid, fmt.Errorf("no order %s", order)
	}
	if err != nil {
		return rid, fmt.Errorf("reading order %s: %w", order, err)
	}
	return rid, nil
}
