package repair_test

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/repair"
)

func TestIDIsSeedStep4(t *testing.T) {
	// SHA256("REBUILD_ORDER_PROJECTION|r1|3|ORDER_CREATED"), computed once by sha256sum.
	const want = "8c1f62d733f60cc8cd01636206a84ff42833301372f875b90bad4a190b997892"
	id := repair.ID("REBUILD_ORDER_PROJECTION", "r1", 3, "ORDER_CREATED")
	require.Equal(t, want, hex.EncodeToString(id))
	require.Equal(t, id, repair.ID("REBUILD_ORDER_PROJECTION", "r1", 3, "ORDER_CREATED"), "stable")
	require.NotEqual(t, id, repair.ID("REBUILD_ORDER_PROJECTION", "r1", 4, "ORDER_CREATED"), "a new version is a new repair")
	require.NotEqual(t, id, repair.ID("REBUILD_ORDER_PROJECTION", "r1", 3, "CANCELLED"))
	back, err := repair.ParseID(hex.EncodeToString(id))
	require.NoError(t, err)
	require.Equal(t, id, back)
	_, err = repair.ParseID("abc")
	require.Error(t, err)
}

// Many callers apply the same repair at once: the step runs exactly once;
// the others see IN_PROGRESS or ALREADY_APPLIED.
func TestApplyRunsTheStepOnce(t *testing.T) {
	store := &repair.Store{Pool: testenv.Database(t)}
	object := ids.NewRandom().String()
	var ran atomic.Int32
	var wg sync.WaitGroup
	outcomes := make([]string, 16)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := repair.New(1, repair.ObjectReservation, object, "TEST_RULE", 1, "DONE")
			task.Operator, task.Reason, task.Automatic = "test", "concurrency", true
			out, err := store.Apply(context.Background(), &task, func(context.Context) (any, string, error) {
				ran.Add(1)
				time.Sleep(20 * time.Millisecond)
				return map[string]any{"ok": true}, "test step", nil
			})
			require.NoError(t, err)
			outcomes[i] = out
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), ran.Load())
	applied := 0
	for _, o := range outcomes {
		require.Contains(t, []string{repair.OutcomeApplied, repair.OutcomeInProgress, repair.OutcomeAlreadyApplied}, o)
		if o == repair.OutcomeApplied {
			applied++
		}
	}
	require.Equal(t, 1, applied)
	got, err := store.Get(context.Background(), repair.ID("TEST_RULE", object, 1, "DONE"))
	require.NoError(t, err)
	require.Equal(t, repair.Applied, got.Status)
	require.Equal(t, "test step", got.Via)
}

// A failed attempt stays PENDING with its error and is taken again.
func TestFailedAttemptIsRetried(t *testing.T) {
	store := &repair.Store{Pool: testenv.Database(t)}
	object := ids.NewRandom().String()
	task := repair.New(1, repair.ObjectReservation, object, "TEST_RULE", 1, "DONE")
	task.Operator, task.Reason = "test", "retry"
	out, err := store.Apply(context.Background(), &task, func(context.Context) (any, string, error) {
		return nil, "", errors.New("redis timeout")
	})
	require.Error(t, err)
	require.Equal(t, repair.OutcomeFailed, out)
	got, _ := store.Get(context.Background(), task.ID)
	require.Equal(t, repair.Pending, got.Status)
	require.Equal(t, "redis timeout", got.LastError)
	out, err = store.Apply(context.Background(), &task, func(context.Context) (any, string, error) { return "ok", "second", nil })
	require.NoError(t, err)
	require.Equal(t, repair.OutcomeApplied, out)
	got, _ = store.Get(context.Background(), task.ID)
	require.Equal(t, 2, got.Attempts)
}

type fixture struct {
	store    *repair.Store
	rs       *redisstore.Store
	slot     redisstore.Slot
	consumer *orderstore.Consumer
	msg      events.OrderCreateRequested
}

// rejected: one reservation PostgreSQL rejected (no stock), task pending.
func rejected(t *testing.T) fixture {
	t.Helper()
	sale := testsale.New(t, 0, 2)
	msg, out := sale.Buy(t, 9)
	require.Equal(t, orderstore.ResultOrderRejected, out.Result)
	return fixture{store: &repair.Store{Pool: sale.Pool}, rs: sale.Redis, slot: sale.Slot, consumer: sale.Consumer, msg: msg}
}

func (f fixture) status(t *testing.T) (reservation, task string) {
	t.Helper()
	require.NoError(t, f.store.Pool.QueryRow(context.Background(), `SELECT r.status, t.status FROM inventory_reservation r
		JOIN compensation_task t USING (reservation_id) WHERE r.reservation_id = $1`, f.msg.ReservationID).Scan(&reservation, &task))
	return
}

// design.md#runbook step 1: a frozen reservation is left alone by the compensator
// and by a replayed message; lifting the freeze (two people) restores it and
// the compensation runs.
func TestFreezeStopsAutomaticActionsUntilLifted(t *testing.T) {
	f := rejected(t)
	ctx := context.Background()
	rid := f.msg.ReservationID

	_, err := f.store.Freeze(ctx, rid, repair.Audit{Operator: "alice"}, nil, nil)
	require.ErrorIs(t, err, repair.ErrNoAuditTrail, "a freeze needs a reason")
	frozen, err := f.store.Freeze(ctx, rid, repair.Audit{Operator: "alice", Reason: "INC-7 stock mismatch", Incident: "INC-7"}, nil, nil)
	require.NoError(t, err)
	require.Equal(t, repair.Applied, frozen.Status)
	require.Equal(t, "ORDER_REJECTED", frozen.Before.(map[string]any)["reservation_status"])
	r, task := f.status(t)
	require.Equal(t, "MANUAL_REVIEW", r)
	require.Equal(t, "MANUAL", task)
	_, err = f.store.Freeze(ctx, rid, repair.Audit{Operator: "alice", Reason: "again"}, nil, nil)
	require.ErrorIs(t, err, repair.ErrFrozen)

	w := &compensation.Worker{Pool: f.store.Pool, Redis: f.rs, Owner: "w", Lease: time.Minute, MaxAttempts: 5, TerminalTTL: time.Hour}
	tasks, err := w.Claim(ctx, 100)
	require.NoError(t, err)
	for _, tk := range tasks {
		require.NotEqual(t, rid, tk.ReservationID, "the compensator leaves a frozen reservation alone")
	}
	// A replayed order-create message (another consumer group) decides nothing.
	replay := &orderstore.Consumer{Pool: f.store.Pool, Group: "replayer", PaymentWindow: time.Hour}
	raw, _ := f.msg.Marshal()
	out, err := replay.Consume(ctx, f.msg, raw)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultManualReview, out.Result)

	_, err = f.store.Unfreeze(ctx, rid, repair.Audit{Operator: "alice", Approver: "alice", Reason: "checked"})
	require.ErrorIs(t, err, repair.ErrNoAuditTrail, "the approver must be someone else")
	lifted, err := f.store.Unfreeze(ctx, rid, repair.Audit{Operator: "alice", Approver: "bob", Reason: "Redis holds the unit; PG rejected it", Incident: "INC-7"})
	require.NoError(t, err)
	require.Equal(t, "ORDER_REJECTED", lifted.Target)
	r, task = f.status(t)
	require.Equal(t, "ORDER_REJECTED", r)
	require.Equal(t, "RETRY", task)
	tasks, err = w.Claim(ctx, 100)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	outcome, _, err := w.Run(ctx, tasks[0])
	require.NoError(t, err)
	require.Equal(t, compensation.OutcomeApplied, outcome)

	audit, err := f.store.List(ctx, f.slot.ActivityID, []string{repair.Applied}, 10)
	require.NoError(t, err)
	require.Len(t, audit, 2)
	require.Equal(t, repair.RuleFreeze, audit[0].Rule)
	require.Equal(t, repair.RuleUnfreeze, audit[1].Rule)
	require.Equal(t, "bob", audit[1].Approver)
	require.Equal(t, "INC-7", audit[1].Incident)
	require.NotNil(t, audit[1].After)
}

// A manual task is closed only with two people and a reason, through a
// standard step.
func TestResolveNeedsTheAuditTrail(t *testing.T) {
	f := rejected(t)
	ctx := context.Background()
	rid := f.msg.ReservationID
	task := repair.New(f.slot.ActivityID, repair.ObjectReservation, rid.String(), "TEST_MANUAL", 1, "MANUAL_REVIEW")
	task.Operator, task.Reason = "reconcile", "needs a person"
	created, err := f.store.Manual(ctx, &task)
	require.NoError(t, err)
	require.True(t, created)
	created, err = f.store.Manual(ctx, &task)
	require.NoError(t, err)
	require.False(t, created, "recorded once")

	steps := &repair.Steps{Pool: f.store.Pool, Redis: f.rs, Owner: "runbook"}
	_, err = f.store.Resolve(ctx, task.ID, repair.Applied, repair.Audit{Operator: "alice", Reason: "x"}, steps.Compensate(rid, true))
	require.ErrorIs(t, err, repair.ErrNoAuditTrail)
	got, err := f.store.Resolve(ctx, task.ID, repair.Applied, repair.Audit{Operator: "alice", Approver: "bob", Reason: "standard compensation"},
		steps.Compensate(rid, true))
	require.NoError(t, err)
	require.Equal(t, repair.Applied, got.Status)
	require.Contains(t, got.Via, "compensation_task")
	r, tk := f.status(t)
	require.Equal(t, "COMPENSATED", r)
	require.Equal(t, "APPLIED", tk)
	_, err = f.store.Resolve(ctx, task.ID, repair.Rejected, repair.Audit{Operator: "alice", Approver: "bob", Reason: "again"}, nil)
	require.ErrorIs(t, err, repair.ErrNotManual, "a closed task stays closed")

	// A step that does not apply to the object's state is refused, and the task stays MANUAL.
	other := repair.New(f.slot.ActivityID, repair.ObjectReservation, rid.String(), "TEST_MANUAL_2", 1, "MANUAL_REVIEW")
	other.Operator, other.Reason = "reconcile", "needs a person"
	_, err = f.store.Manual(ctx, &other)
	require.NoError(t, err)
	_, err = f.store.Resolve(ctx, other.ID, repair.Applied, repair.Audit{Operator: "alice", Approver: "bob", Reason: "wrong step"},
		steps.RebuildProjection(rid))
	require.ErrorIs(t, err, repair.ErrNotApplicable)
	still, _ := f.store.Get(ctx, other.ID)
	require.Equal(t, repair.Manual, still.Status)
}

// The recount refuses while Redis has not yet applied what PostgreSQL
// decided (a unit would count twice), then sets the counters; a second
// recount changes nothing. A ghost open entry (hash gone) stays reserved
// and is reported.
func TestRecountWaitsForPropagation(t *testing.T) {
	ctx := context.Background()
	s := testsale.New(t, 5, 5)
	steps := &repair.Steps{Pool: s.Pool, Redis: s.Redis, Owner: "test"}
	recount := steps.RecountRedis(s.SKU.Slots(s.Activity))

	created, out := s.Buy(t, 1) // PostgreSQL has the order; Redis still RESERVED
	_, _, err := recount(ctx)
	require.ErrorIs(t, err, repair.ErrPropagationPending)
	s.Project(t, created, out.OrderID)

	cancelled, out2 := s.Buy(t, 2)
	s.Project(t, cancelled, out2.OrderID)
	s.Exec(t, `UPDATE orders SET status = 'CANCELLED', cancelled_at = now() WHERE order_id = $1`, out2.OrderID)
	_, _, err = recount(ctx)
	require.ErrorIs(t, err, repair.ErrPropagationPending, "a cancelled order still live in Redis")
	s.Exec(t, `UPDATE orders SET status = 'PAID', paid_at = now() WHERE order_id = $1`, out2.OrderID)

	ghost := s.Reserve(t, 3, time.Hour, true)
	require.NoError(t, s.Redis.Client().Del(ctx, s.Slot.Reservation(ghost.ReservationID)).Err())
	// Redis lost a committed unit's write.
	require.NoError(t, s.Redis.Client().HIncrBy(ctx, s.Slot.Counter(), "committed", -1).Err())
	require.NoError(t, s.Redis.Client().IncrBy(ctx, s.Slot.Stock(), 1).Err())

	after, via, err := recount(ctx)
	require.NoError(t, err)
	require.Equal(t, "recount.lua", via)
	b := after.(map[string]any)["buckets"].([]repair.BucketRecount)
	require.Len(t, b, 1)
	require.Equal(t, "RECOUNTED", b[0].Result)
	require.Equal(t, 1, b[0].OpenWithoutHash)
	require.Equal(t, int64(2), b[0].PostgresCommitted)
	require.Equal(t, redisstore.Counters{Initial: 5, Available: 2, OpenReserved: 1, Committed: 2, Exists: true}, s.Counters(t))
	after, _, err = recount(ctx)
	require.NoError(t, err)
	require.Equal(t, "UNCHANGED", after.(map[string]any)["buckets"].([]repair.BucketRecount)[0].Result)
}
