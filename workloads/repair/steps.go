package repair

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
)

var (
	qFacts        = sqlfile.Must(sqlFiles, "reservation_facts")
	qDecided      = sqlfile.Must(sqlFiles, "reservation_decided")
	qOutboxResend = sqlfile.Must(sqlFiles, "outbox_resend")
)

// ErrNotApplicable: the object is not in a state the step is for.
var ErrNotApplicable = errors.New("repair step does not apply to the object's current state")

// Steps are the standard state machine steps a repair may call (design.md#runbook
// step 5): never a direct stock UPDATE, always the script or transaction
// the pipeline itself uses.
type Steps struct {
	Pool  *pgxpool.Pool
	Redis *redisstore.Store
	// Owner is the lease owner the steps' compensation claims use.
	Owner string
	// TerminalTTL is the retention of a terminal Redis reservation (default 24 h).
	TerminalTTL time.Duration
	// MaxAttempts caps a compensation task's attempts (default 10).
	MaxAttempts int
}

// Facts is a reservation as PostgreSQL has it.
type Facts struct {
	Status               states.ReservationStatus
	Slot                 redisstore.Slot
	User                 int64
	Request, Message     uuid.UUID
	Order                *uuid.UUID
	ReservedAt, Deadline time.Time
	OrderStatus          states.OrderStatus
	TaskID               *uuid.UUID
	TaskStatus           states.TaskStatus
}

// Facts reads a reservation.
func (s *Steps) Facts(ctx context.Context, reservationID uuid.UUID) (Facts, error) {
	var f Facts
	var activity, sku int64
	var bucket int
	err := s.Pool.QueryRow(ctx, qFacts, reservationID).Scan(&f.Status, &activity, &sku, &bucket, &f.User, &f.Request, &f.Message,
		&f.Order, &f.ReservedAt, &f.Deadline, &f.OrderStatus, &f.TaskID, &f.TaskStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("%w: no reservation %s in PostgreSQL", ErrNotApplicable, reservationID)
	}
	if err != nil {
		return f, fmt.Errorf("reading reservation %s: %w", reservationID, err)
	}
	f.Slot = redisstore.Slot{ActivityID: activity, SKUID: sku, Bucket: bucket}
	return f, nil
}

func (s *Steps) ttl() time.Duration {
	if s.TerminalTTL > 0 {
		return s.TerminalTTL
	}
	return 24 * time.Hour
}

// RebuildProjection applies ORDER_CREATED to Redis through the projector's
// script, or rebuilds a lost hash from PostgreSQL; stock is never touched.
func (s *Steps) RebuildProjection(reservationID uuid.UUID) Step {
	return func(ctx context.Context) (any, string, error) {
		f, err := s.Facts(ctx, reservationID)
		if err != nil {
			return nil, "", err
		}
		if f.Order == nil || f.Status != states.ReservationOrderCreated {
			return nil, "", fmt.Errorf("%w: reservation %s is %s without an order", ErrNotApplicable, reservationID, f.Status)
		}
		h, err := s.Redis.Reservation(ctx, f.Slot, reservationID)
		if err != nil {
			return nil, "", err
		}
		now := time.Now()
		var res redisstore.Result
		via := "project_order_created.lua"
		if h == nil {
			via = "rebuild_projection.lua"
			res, err = s.Redis.RebuildProjection(ctx, f.Slot, redisstore.Rebuild{ReservationID: reservationID, MessageID: f.Message,
				RequestID: f.Request, OrderID: *f.Order, UserID: f.User, ReservedAt: f.ReservedAt, BusinessDeadline: f.Deadline}, now)
		} else {
			res, err = s.Redis.ProjectOrderCreated(ctx, f.Slot, reservationID, *f.Order, now)
		}
		if err != nil {
			return nil, via, err
		}
		if !res.OK() {
			return nil, via, fmt.Errorf("%w: %s answered %s", ErrNotApplicable, via, res.Reason)
		}
		h, err = s.Redis.Reservation(ctx, f.Slot, reservationID)
		return map[string]any{"result": res.Reason, "redis_status": string(h.Status())}, via, err
	}
}

// EnsureCompensation writes a rejected reservation's standard compensation
// task if it is missing.
func (s *Steps) EnsureCompensation(reservationID uuid.UUID) Step {
	return func(ctx context.Context) (any, string, error) {
		var created bool
		err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			var status states.ReservationStatus
			if err := tx.QueryRow(ctx, qDecided, reservationID).Scan(&status); err != nil {
				return fmt.Errorf("locking reservation %s: %w", reservationID, err)
			}
			if !status.Rejected() || status == states.ReservationCompensated {
				return fmt.Errorf("%w: reservation %s is %s, not rejected", ErrNotApplicable, reservationID, status)
			}
			var err error
			created, err = orderstore.EnsureCompensationTask(ctx, tx, reservationID)
			return err
		})
		return map[string]any{"compensation_task_created": created}, "compensation_task RELEASE_REDIS_RESERVATION:" + reservationID.String(), err
	}
}

// Compensate runs the reservation's compensation task through the standard
// worker steps (authorize, conditional Lua, complete PostgreSQL). When the
// Lua already ran it answers ALREADY_COMPENSATED and PostgreSQL is completed
// without a second increment. takeManual allows a MANUAL task.
func (s *Steps) Compensate(reservationID uuid.UUID, takeManual bool) Step {
	return func(ctx context.Context) (any, string, error) {
		f, err := s.Facts(ctx, reservationID)
		if err != nil {
			return nil, "", err
		}
		if f.TaskID == nil {
			return nil, "", fmt.Errorf("%w: reservation %s has no compensation task", ErrNotApplicable, reservationID)
		}
		max := s.MaxAttempts
		if max <= 0 {
			max = 10
		}
		w := &compensation.Worker{Pool: s.Pool, Redis: s.Redis, Owner: s.Owner, Lease: 30 * time.Second, MaxAttempts: max, TerminalTTL: s.ttl()}
		via := "compensation_task " + f.TaskID.String()
		outcome, reason, err := w.RunTask(ctx, *f.TaskID, takeManual)
		if err != nil {
			return nil, via, err
		}
		if outcome != compensation.OutcomeApplied {
			return nil, via, fmt.Errorf("compensation task %s: %s (%s)", f.TaskID, outcome, reason)
		}
		return map[string]any{"compensation": reason, "reservation_status": string(states.ReservationCompensated)}, via, nil
	}
}

// ReleaseCancelled applies a cancelled order's ORDER_CANCELLED to Redis
// through the projector's script (the unit sellable again, once).
func (s *Steps) ReleaseCancelled(reservationID uuid.UUID) Step {
	return func(ctx context.Context) (any, string, error) {
		f, err := s.Facts(ctx, reservationID)
		if err != nil {
			return nil, "", err
		}
		if f.Order == nil || !f.OrderStatus.Ended() {
			return nil, "", fmt.Errorf("%w: the order of %s is not cancelled (%s)", ErrNotApplicable, reservationID, f.OrderStatus)
		}
		res, err := s.Redis.ReleaseAfterCancel(ctx, f.Slot, reservationID, *f.Order, time.Now(), s.ttl())
		const via = "release_after_cancel.lua"
		if err != nil {
			return nil, via, err
		}
		if !res.OK() {
			return nil, via, fmt.Errorf("%w: %s answered %s", ErrNotApplicable, via, res.Reason)
		}
		return map[string]any{"result": res.Reason, "redis_status": string(states.HashCancelled)}, via, nil
	}
}

// ReclaimOutbox makes a SENDING event whose lease expired before
// expiredBefore due again.
func (s *Steps) ReclaimOutbox(eventID uuid.UUID, expiredBefore time.Time) Step {
	return func(ctx context.Context) (any, string, error) {
		ok, err := outbox.Reclaim(ctx, s.Pool, eventID, expiredBefore)
		if err != nil {
			return nil, "outbox.Reclaim", err
		}
		return map[string]any{"reclaimed": ok, "status": string(states.OutboxRetry)}, "outbox.Reclaim", nil
	}
}

// ResendOutbox gives a MANUAL outbox event a fresh attempt budget: the
// relay sends it again under the same event id.
func (s *Steps) ResendOutbox(eventID uuid.UUID) Step {
	return func(ctx context.Context) (any, string, error) {
		rows, err := s.Pool.Query(ctx, qOutboxResend, eventID)
		if err != nil {
			return nil, "outbox resend", fmt.Errorf("resending outbox event %s: %w", eventID, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return nil, "outbox resend", fmt.Errorf("resending outbox event %s: %w", eventID, err)
		}
		if len(got) == 0 {
			return nil, "outbox resend", fmt.Errorf("%w: outbox event %s is not MANUAL", ErrNotApplicable, eventID)
		}
		return map[string]any{"status": string(states.OutboxRetry)}, "outbox resend", nil
	}
}
