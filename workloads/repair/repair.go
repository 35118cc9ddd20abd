// Package repair keeps the repair tasks of design.md#runbook: every repair has an
// idempotent id (SHA-256 of rule, object, expected version and target
// state), is leased before it is applied so that two runs never apply it
// twice, and carries its audit trail (operator, approver, reason, incident,
// evidence, state before and after, the standard step that applied it).
// Freezing a reservation (step 1) lives here too.
package repair

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qTaskClaim     = sqlfile.Must(sqlFiles, "task_claim")
	qTaskDone      = sqlfile.Must(sqlFiles, "task_done")
	qTaskFailed    = sqlfile.Must(sqlFiles, "task_failed")
	qTaskManual    = sqlfile.Must(sqlFiles, "task_manual")
	qTaskGet       = sqlfile.Must(sqlFiles, "task_get")
	qTaskList      = sqlfile.Must(sqlFiles, "task_list")
	qTaskResolve   = sqlfile.Must(sqlFiles, "task_resolve")
	qResLock       = sqlfile.Must(sqlFiles, "reservation_lock")
	qFreeze        = sqlfile.Must(sqlFiles, "freeze")
	qFreezeTasks   = sqlfile.Must(sqlFiles, "freeze_tasks")
	qUnfreeze      = sqlfile.Must(sqlFiles, "unfreeze")
	qUnfreezeTasks = sqlfile.Must(sqlFiles, "unfreeze_tasks")
)

// Task statuses (ck_repair_task_status).
const (
	Pending  = string(states.RepairPending)
	Applied  = string(states.RepairApplied)
	Manual   = string(states.RepairManual)
	Rejected = string(states.RepairRejected)
)

// Object types.
const (
	ObjectReservation = "RESERVATION"
	ObjectOrder       = "ORDER"
	ObjectOutbox      = "OUTBOX_EVENT"
	ObjectPayment     = "PAYMENT"
	ObjectSKU         = "SKU"
)

// Errors.
var (
	ErrNotFound     = errors.New("repair task not found")
	ErrNotManual    = errors.New("repair task is not waiting for manual review")
	ErrFrozen       = errors.New("reservation is frozen for manual review")
	ErrNotFrozen    = errors.New("reservation is not frozen")
	ErrNoAuditTrail = errors.New("a manual repair needs an operator, an approver other than the operator, and a reason")
)

// ID is design.md#runbook step 4: SHA256(rule | object | expected version | target).
func ID(rule, objectID string, version int64, target string) []byte {
	h := sha256.Sum256([]byte(rule + "|" + objectID + "|" + strconv.FormatInt(version, 10) + "|" + target))
	return h[:]
}

// ParseID reads a repair id printed as hex.
func ParseID(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("repair id %q: want %d hex-encoded bytes", s, sha256.Size)
	}
	return b, nil
}

// Task is one repair, automatic or for a person.
type Task struct {
	ID         []byte         `json:"-"`
	IDHex      string         `json:"repair_id"`
	Activity   int64          `json:"activity_id"`
	ObjectType string         `json:"object_type"`
	ObjectID   string         `json:"object_id"`
	Rule       string         `json:"rule"`
	Version    int64          `json:"expected_version"`
	Target     string         `json:"target_state"`
	Status     string         `json:"status"`
	Automatic  bool           `json:"automatic"`
	Evidence   map[string]any `json:"evidence"`
	Operator   string         `json:"operator"`
	Approver   string         `json:"approver,omitempty"`
	Reason     string         `json:"reason"`
	Incident   string         `json:"incident_id,omitempty"`
	Before     any            `json:"before_state,omitempty"`
	After      any            `json:"after_state,omitempty"`
	Via        string         `json:"applied_via,omitempty"`
	LastError  string         `json:"last_error,omitempty"`
	Attempts   int            `json:"attempts"`
	RunID      *uuid.UUID     `json:"run_id,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
}

// New fills the id from the rule, object, version and target.
func New(activity int64, objectType, objectID, rule string, version int64, target string) Task {
	id := ID(rule, objectID, version, target)
	return Task{ID: id, IDHex: hex.EncodeToString(id), Activity: activity, ObjectType: objectType,
		ObjectID: objectID, Rule: rule, Version: version, Target: target, Evidence: map[string]any{}}
}

// Store reads and writes repair tasks.
type Store struct {
	Pool *pgxpool.Pool
	// Lease bounds one attempt (default 2 minutes).
	Lease time.Duration
}

func (s *Store) lease() string {
	d := s.Lease
	if d <= 0 {
		d = 2 * time.Minute
	}
	return fmt.Sprintf("%d milliseconds", d.Milliseconds())
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func jsonOf(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`null`)
	}
	return b
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Store) claim(ctx context.Context, q querier, t *Task) (bool, error) {
	var attempts int
	err := q.QueryRow(ctx, qTaskClaim, t.ID, t.Activity, t.ObjectType, t.ObjectID, t.Rule, t.Version, t.Target,
		t.Automatic, jsonOf(t.Evidence), t.Operator, nullable(t.Approver), t.Reason, nullable(t.Incident),
		jsonOf(t.Before), t.RunID, s.lease()).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claiming repair %s %s: %w", t.Rule, t.ObjectID, err)
	}
	t.Attempts = attempts
	return true, nil
}

// Outcomes of Apply.
const (
	OutcomeApplied        = "APPLIED"         // this call applied it
	OutcomeAlreadyApplied = "ALREADY_APPLIED" // an earlier run did
	OutcomeInProgress     = "IN_PROGRESS"     // another process holds its lease
	OutcomeFailed         = "FAILED"          // this attempt failed; the next run tries again
	OutcomeClosed         = "CLOSED"          // MANUAL or REJECTED: a person owns it
)

// Step applies a repair through a standard state machine step and returns
// the state after it and what did it (a script, a task id).
type Step func(ctx context.Context) (after any, via string, err error)

// Apply leases t and runs step at most once across every caller: a second
// caller with the same id gets ALREADY_APPLIED or IN_PROGRESS, never a
// second application.
func (s *Store) Apply(ctx context.Context, t *Task, step Step) (string, error) {
	ok, err := s.claim(ctx, s.Pool, t)
	if err != nil {
		return OutcomeFailed, err
	}
	if !ok {
		cur, err := s.Get(ctx, t.ID)
		if err != nil {
			return OutcomeFailed, err
		}
		t.Status = cur.Status
		switch cur.Status {
		case Applied:
			return OutcomeAlreadyApplied, nil
		case Pending:
			return OutcomeInProgress, nil
		default:
			return OutcomeClosed, nil
		}
	}
	after, via, stepErr := step(ctx)
	if stepErr != nil {
		t.Status, t.LastError = Pending, stepErr.Error()
		if _, err := s.Pool.Exec(context.WithoutCancel(ctx), qTaskFailed, t.ID, stepErr.Error()); err != nil {
			return OutcomeFailed, fmt.Errorf("%w (and recording the failure: %w)", stepErr, err)
		}
		return OutcomeFailed, stepErr
	}
	if _, err := s.Pool.Exec(ctx, qTaskDone, t.ID, jsonOf(after), via); err != nil {
		return OutcomeFailed, fmt.Errorf("recording repair %s applied: %w", t.IDHex, err)
	}
	t.Status, t.After, t.Via = Applied, after, via
	return OutcomeApplied, nil
}

// Manual records a finding for a person, once; true when this call wrote it.
func (s *Store) Manual(ctx context.Context, t *Task) (bool, error) {
	t.Status = Manual
	var id []byte
	err := s.Pool.QueryRow(ctx, qTaskManual, t.ID, t.Activity, t.ObjectType, t.ObjectID, t.Rule, t.Version, t.Target,
		jsonOf(t.Evidence), t.Operator, t.Reason, jsonOf(t.Before), t.RunID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("recording manual repair %s %s: %w", t.Rule, t.ObjectID, err)
	}
	return true, nil
}

func scanTask(r pgx.CollectableRow) (Task, error) {
	var t Task
	var ev, before, after []byte
	err := r.Scan(&t.ID, &t.Activity, &t.ObjectType, &t.ObjectID, &t.Rule, &t.Version, &t.Target, &t.Status,
		&t.Automatic, &ev, &t.Operator, &t.Approver, &t.Reason, &t.Incident, &before, &after, &t.Via,
		&t.LastError, &t.Attempts, &t.CreatedAt, &t.UpdatedAt)
	if err != nil {
		return t, err
	}
	t.IDHex = hex.EncodeToString(t.ID)
	for _, f := range []struct {
		name string
		raw  []byte
		into any
	}{{"evidence", ev, &t.Evidence}, {"before_state", before, &t.Before}, {"after_state", after, &t.After}} {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.into); err != nil {
			return t, fmt.Errorf("repair task %s: reading its %s: %w", t.IDHex, f.name, err)
		}
	}
	return t, nil
}

// Get reads one task.
func (s *Store) Get(ctx context.Context, id []byte) (Task, error) {
	rows, err := s.Pool.Query(ctx, qTaskGet, id)
	if err != nil {
		return Task{}, fmt.Errorf("reading repair task: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return Task{}, fmt.Errorf("reading repair task: %w", err)
	}
	if len(ts) == 0 {
		return Task{}, fmt.Errorf("%w: %s", ErrNotFound, hex.EncodeToString(id))
	}
	return ts[0], nil
}

// List reads the tasks of an activity (0: all) in the given statuses.
func (s *Store) List(ctx context.Context, activity int64, statuses []string, limit int) ([]Task, error) {
	rows, err := s.Pool.Query(ctx, qTaskList, activity, statuses, limit)
	if err != nil {
		return nil, fmt.Errorf("listing repair tasks: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return nil, fmt.Errorf("listing repair tasks: %w", err)
	}
	return ts, nil
}

// Audit is who asked for a manual action and why (design.md#runbook step 7).
type Audit struct {
	Operator, Approver, Reason, Incident string
}

// Check refuses an incomplete audit trail: a manual repair needs two people.
func (a Audit) Check() error {
	if a.Operator == "" || a.Approver == "" || a.Reason == "" || a.Operator == a.Approver {
		return ErrNoAuditTrail
	}
	return nil
}

// Resolve closes a MANUAL task after a person decided: APPLIED (step ran
// through the standard state machine; nil step: the decision needs no
// action) or REJECTED.
func (s *Store) Resolve(ctx context.Context, id []byte, status string, a Audit, step Step) (Task, error) {
	if err := a.Check(); err != nil {
		return Task{}, err
	}
	if status != Applied && status != Rejected {
		return Task{}, fmt.Errorf("resolve status %q: want %s or %s", status, Applied, Rejected)
	}
	t, err := s.Get(ctx, id)
	if err != nil {
		return t, err
	}
	if t.Status != Manual {
		return t, fmt.Errorf("%w: %s is %s", ErrNotManual, t.IDHex, t.Status)
	}
	var after any = map[string]any{"decision": status}
	via := "decision only"
	if step != nil && status == Applied {
		if after, via, err = step(ctx); err != nil {
			return t, fmt.Errorf("applying the approved repair of %s: %w", t.IDHex, err)
		}
	}
	rows, err := s.Pool.Query(ctx, qTaskResolve, id, status, a.Operator, a.Approver, a.Reason, a.Incident, jsonOf(after), via)
	if err != nil {
		return t, fmt.Errorf("resolving repair task %s: %w", t.IDHex, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return t, fmt.Errorf("resolving repair task %s: %w", t.IDHex, err)
	}
	if len(got) == 0 {
		return t, fmt.Errorf("%w: %s changed meanwhile", ErrNotManual, t.IDHex)
	}
	return s.Get(ctx, id)
}
