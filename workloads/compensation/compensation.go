// Package compensation restores Redis stock for reservations that
// PostgreSQL rejected (design.md#compensation): a persisted decision first (the CAS
// ORDER_REJECTED → COMPENSATING), then the conditional Lua, then
// COMPENSATED and the task APPLIED in one transaction. A crash anywhere is
// repaired by running the same steps again with the same compensation id.
package compensation

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

	"github.com/seckill/seckill-operator/workloads/lease"
	"github.com/seckill/seckill-operator/workloads/redisstore"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qBacklog   = sqlfile.Must(sqlFiles, "backlog")
	qClaim     = sqlfile.Must(sqlFiles, "claim")
	qAuthorize = sqlfile.Must(sqlFiles, "authorize")
	qComplete  = sqlfile.Must(sqlFiles, "complete")
	qApplied   = sqlfile.Must(sqlFiles, "applied")
	qSettle    = sqlfile.Must(sqlFiles, "settle")
	qClaimOne  = sqlfile.Must(sqlFiles, "claim_one")
)

// ErrNotClaimable: the task is held by a live lease, finished, or MANUAL
// without the evidence that allows taking it.
var ErrNotClaimable = errors.New("compensation task is not claimable")

// Task is one claimed compensation task.
type Task struct {
	TaskID         uuid.UUID
	ReservationID  uuid.UUID
	CompensationID string
	Attempt        int
	Slot           redisstore.Slot
	// Traceparent is the W3C context of the step that rejected the
	// reservation ("" untraced): the compensate span's parent.
	Traceparent string
}

// Worker runs compensation tasks.
type Worker struct {
	Pool        *pgxpool.Pool
	Redis       *redisstore.Store
	Owner       string
	Lease       time.Duration
	MaxAttempts int
	TerminalTTL time.Duration
	Now         func() time.Time
	// Failpoint, when set, is called at after_compensation_lua (design.md#failpoints).
	Failpoint func(name string) error
	// DBNow is the claims' clock for tests (a lease made to run out
	// without a sleep); nil, as in production: PostgreSQL's.
	DBNow func() time.Time
}

// dbNow is DBNow's time, or nil (NULL: the database's clock).
func (w *Worker) dbNow() *time.Time {
	if w.DBNow == nil {
		return nil
	}
	t := w.DBNow()
	return &t
}

// Outcomes of one task.
const (
	OutcomeApplied = "APPLIED" // Redis restored now, or found restored (ALREADY_COMPENSATED)
	OutcomeManual  = "MANUAL"  // needs a person or the reconcile job; never a blind INCR
	OutcomeRetry   = "RETRY"   // transient failure; same compensation id next time
)

// Claim leases up to limit due tasks.
func (w *Worker) Claim(ctx context.Context, limit int) ([]Task, error) {
	rows, err := w.Pool.Query(ctx, qClaim, limit, w.Owner, fmt.Sprintf("%d milliseconds", w.Lease.Milliseconds()), w.dbNow())
	if err != nil {
		return nil, fmt.Errorf("claiming compensation tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return nil, fmt.Errorf("claiming compensation tasks: %w", err)
	}
	return tasks, nil
}

func scanTask(r pgx.CollectableRow) (Task, error) {
	var t Task
	var activity, sku int64
	var bucket int
	err := r.Scan(&t.TaskID, &t.ReservationID, &t.CompensationID, &t.Attempt, &activity, &sku, &bucket, &t.Traceparent)
	t.Slot = redisstore.Slot{ActivityID: activity, SKUID: sku, Bucket: bucket}
	return t, err
}

// RunTask claims one named task and runs it through the same steps as the
// worker loop (the reconcile job's standard compensation, design.md#auto-repair).
// takeManual allows a MANUAL task when the caller holds the evidence.
func (w *Worker) RunTask(ctx context.Context, taskID uuid.UUID, takeManual bool) (string, string, error) {
	rows, err := w.Pool.Query(ctx, qClaimOne, taskID, w.Owner, fmt.Sprintf("%d milliseconds", w.Lease.Milliseconds()), takeManual, w.dbNow())
	if err != nil {
		return "", "", fmt.Errorf("claiming compensation task %s: %w", taskID, err)
	}
	tasks, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return "", "", fmt.Errorf("claiming compensation task %s: %w", taskID, err)
	}
	if len(tasks) == 0 {
		return "", "", fmt.Errorf("%w: %s", ErrNotClaimable, taskID)
	}
	return w.Run(ctx, tasks[0])
}

// Run carries one claimed task as far as it can go and returns its outcome
// with the Lua's reason.
func (w *Worker) Run(ctx context.Context, t Task) (outcome, reason string, err error) {
	ctx, span := tracing.Start(tracing.FromTraceparent(ctx, t.Traceparent), tracing.SpanCompensate, trace.SpanKindInternal,
		tracing.AttrReservation.String(t.ReservationID.String()), tracing.AttrAttempt.Int(t.Attempt))
	defer func() {
		span.SetAttributes(tracing.AttrResult.String(outcome + ":" + reason))
		tracing.End(span, err)
	}()
	return w.run(ctx, t)
}

func (w *Worker) run(ctx context.Context, t Task) (string, string, error) {
	var status states.ReservationStatus
	if err := w.Pool.QueryRow(ctx, qAuthorize, t.ReservationID).Scan(&status); err != nil {
		return w.settle(ctx, t, OutcomeRetry, "AUTHORIZE_FAILED", err)
	}
	if status != states.ReservationCompensating {
		// Not authorized: an order exists or the state moved elsewhere.
		return w.settle(ctx, t, OutcomeManual, "STATE_CONFLICT:"+string(status), nil)
	}
	now := time.Now()
	if w.Now != nil {
		now = w.Now()
	}
	res, err := w.Redis.Compensate(ctx, t.Slot, t.ReservationID, t.CompensationID, now, w.TerminalTTL)
	if err != nil {
		// Unknown: the Lua may have run. The same id next time is safe.
		return w.settle(ctx, t, OutcomeRetry, "REDIS_UNKNOWN", err)
	}
	if !res.OK() {
		// RESERVATION_MISSING, ORDER_ALREADY_EXISTS, mismatches, id conflicts:
		// evidence for the reconcile job or a person.
		return w.settle(ctx, t, OutcomeManual, res.Reason, nil)
	}
	if w.Failpoint != nil {
		if err := w.Failpoint("after_compensation_lua"); err != nil {
			return OutcomeRetry, res.Reason, err
		}
	}
	if err := w.complete(ctx, t, res.Reason); err != nil {
		return OutcomeRetry, res.Reason, err
	}
	return OutcomeApplied, res.Reason, nil
}

func (w *Worker) complete(ctx context.Context, t Task, result string) error {
	return pgx.BeginTxFunc(ctx, w.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qComplete, t.ReservationID); err != nil {
			return fmt.Errorf("marking reservation %s compensated: %w", t.ReservationID, err)
		}
		tag, err := tx.Exec(ctx, qApplied, t.TaskID, w.Owner, result)
		if err != nil {
			return fmt.Errorf("marking task %s applied: %w", t.TaskID, err)
		}
		if tag.RowsAffected() == 0 {
			// Another worker took the task over; it completes it (its Lua
			// answers ALREADY_COMPENSATED). Roll back so the states stay together.
			return fmt.Errorf("marking task %s applied: %w", t.TaskID, lease.ErrLost)
		}
		return nil
	})
}

func (w *Worker) settle(ctx context.Context, t Task, outcome, reason string, cause error) (string, string, error) {
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	var status string
	err := w.Pool.QueryRow(ctx, qSettle, t.TaskID, w.Owner, outcome,
		fmt.Sprintf("%d milliseconds", lease.Backoff(t.Attempt).Milliseconds()), reason, msg, w.MaxAttempts).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return outcome, reason, fmt.Errorf("settling task %s: %w", t.TaskID, lease.ErrLost)
	}
	if err != nil {
		return outcome, reason, fmt.Errorf("settling task %s: %w", t.TaskID, err)
	}
	return status, reason, cause
}

// Backlog counts the compensation tasks still to be done and the age of the oldest.
func (w *Worker) Backlog(ctx context.Context) (int64, time.Duration, error) {
	var n int64
	var age float64
	if err := w.Pool.QueryRow(ctx, qBacklog).Scan(&n, &age); err != nil {
		return 0, 0, fmt.Errorf("measuring the compensation tasks backlog: %w", err)
	}
	return n, time.Duration(age * float64(time.Second)), nil
}
