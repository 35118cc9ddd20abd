package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/reconcile"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/repair"
)

// design.md#faults / design.md#rules row 13 on a real Sentinel failover: the primary
// acknowledged writes its replica never received, then died. The promoted
// replica is a consistent but older Redis: two orders PostgreSQL created,
// one rejection and one reservation that was never sent are gone from it.
// Nothing adds stock back for a missing key; PostgreSQL's final stock
// guard keeps refusing what the stale Redis lets through; the reconcile job
// rebuilds the lost order projections and leaves the rest to a person, who
// recounts the SKU (design.md#runbook, activity-level) and closes the lost
// rejection; then everything is clean and stock is conserved.
func TestRedisFailoverLosingAcknowledgedWrites(t *testing.T) {
	ctx := context.Background()
	fo := testenv.RedisFailover(t)
	s := testsale.NewOn(t, fo.Client(t), 5, 10)
	job := &reconcile.Job{Pool: s.Pool, Redis: s.Redis, HardDeadlineGrace: time.Second}
	for u := int64(1); u <= 3; u++ {
		m, out := s.Buy(t, u)
		require.Equal(t, orderstore.ResultOrderCreated, out.Result)
		s.Project(t, m, out.OrderID)
	}
	fo.Replicated(t)
	require.Equal(t, redisstore.Counters{Initial: 10, Available: 7, Committed: 3, Exists: true}, s.Counters(t))

	// Acknowledged by the primary only.
	fo.CutReplication(t)
	projected, out5 := s.Buy(t, 5)
	s.Project(t, projected, out5.OrderID)
	inFlight, out6 := s.Buy(t, 6) // ORDER_CREATED event not projected yet
	rejected, out7 := s.Buy(t, 7) // PostgreSQL is sold out
	require.Equal(t, orderstore.ResultOrderCreated, out6.Result)
	require.Equal(t, "ORDER_REJECTED", out7.Result)
	unsent := s.Reserve(t, 8, time.Hour, false) // the gateway died before sending
	require.Equal(t, redisstore.Counters{Initial: 10, Available: 3, OpenReserved: 3, Committed: 4, Exists: true}, s.Counters(t), "the old primary had them")

	fo.LosePrimary(t, s.Redis.Client())
	// The promoted replica: the state before the cut, internally conserved.
	require.Equal(t, redisstore.Counters{Initial: 10, Available: 7, Committed: 3, Exists: true}, s.Counters(t))
	for _, m := range []uuid.UUID{projected.ReservationID, inFlight.ReservationID, rejected.ReservationID, unsent.ReservationID} {
		n, err := s.Redis.Client().Exists(ctx, s.Slot.Reservation(m)).Result()
		require.NoError(t, err)
		require.Zero(t, n, "reservation %s lost in the failover", m)
	}

	// The pipeline meets the loss: the projector finds no hash and changes
	// nothing; the compensator refuses a blind INCR and gives the task to a person.
	res, err := s.Redis.ProjectOrderCreated(ctx, s.Slot, inFlight.ReservationID, out6.OrderID, time.Now())
	require.NoError(t, err)
	require.Equal(t, "RESERVATION_MISSING", res.Reason)
	s.CompensateAll(t)
	require.Equal(t, "MANUAL", s.One(t, `SELECT status FROM compensation_task WHERE reservation_id = $1`, rejected.ReservationID))
	require.Equal(t, redisstore.Counters{Initial: 10, Available: 7, Committed: 3, Exists: true}, s.Counters(t), "no stock added for a missing key")

	// Redis forgot user 5 bought: PostgreSQL refuses the second order and
	// the extra Redis unit is compensated.
	_, again := s.Buy(t, 5)
	require.Equal(t, "ORDER_REJECTED", again.Result)
	s.CompensateAll(t)
	require.Equal(t, "1", s.One(t, `SELECT count(*)::text FROM orders WHERE activity_id = $1 AND user_id = 5`, s.Activity))

	// Reconcile: the two lost order projections are rebuilt (stock
	// untouched); the lost rejection and the SKU's counters go to a person.
	rep := run(t, s, job)
	found := byType(rep)
	require.Len(t, found[reconcile.RuleRebuildProjection], 2, "%+v", rep.Anomalies)
	for _, a := range found[reconcile.RuleRebuildProjection] {
		require.True(t, a.Repaired())
	}
	require.Len(t, found[reconcile.RuleRedisReservationMissing], 1, "%+v", rep.Anomalies)
	require.Equal(t, rejected.ReservationID.String(), found[reconcile.RuleRedisReservationMissing][0].Object)
	require.Len(t, found[reconcile.CrossSystem], 1, "%+v", rep.Anomalies)
	cross := found[reconcile.CrossSystem][0]
	require.Equal(t, reconcile.Critical, cross.Severity)
	require.Equal(t, int64(2), cross.Delta, "PostgreSQL holds 5 units, Redis committed 3")
	require.Equal(t, repair.Manual, cross.Repair.Outcome)
	require.Equal(t, repair.RuleRecount, cross.Repair.Rule)
	require.Equal(t, "ANOMALIES", rep.Status)
	require.Equal(t, "ORDER_CREATED", s.RedisStatus(t, inFlight.ReservationID))
	require.Equal(t, redisstore.Counters{Initial: 10, Available: 7, Committed: 3, Exists: true}, s.Counters(t), "rebuilding a projection never touches stock")

	store := &repair.Store{Pool: s.Pool}
	steps := &repair.Steps{Pool: s.Pool, Redis: s.Redis, Owner: "runbook:alice"}
	audit := repair.Audit{Operator: "alice", Approver: "bob", Reason: "Redis failover lost acknowledged writes", Incident: "INC-7"}
	rejectedTask, err := repair.ParseID(found[reconcile.RuleRedisReservationMissing][0].Repair.ID)
	require.NoError(t, err)
	_, err = store.Resolve(ctx, rejectedTask, repair.Applied, audit, steps.CloseByRecount(rejected.ReservationID))
	require.True(t, errors.Is(err, repair.ErrNotApplicable), "closing before the recount is refused: %v", err)

	recountTask, err := repair.ParseID(cross.Repair.ID)
	require.NoError(t, err)
	done, err := store.Resolve(ctx, recountTask, repair.Applied, audit, steps.RecountRedis(s.SKU.Slots(s.Activity)))
	require.NoError(t, err)
	require.Equal(t, repair.Applied, done.Status)
	require.Equal(t, "recount.lua", done.Via)
	require.Equal(t, redisstore.Counters{Initial: 10, Available: 5, Committed: 5, Exists: true}, s.Counters(t))

	_, err = store.Resolve(ctx, rejectedTask, repair.Applied, audit, steps.CloseByRecount(rejected.ReservationID))
	require.NoError(t, err)
	require.Equal(t, "COMPENSATED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, rejected.ReservationID))
	require.Equal(t, "VERIFIED", s.One(t, `SELECT status FROM compensation_task WHERE reservation_id = $1`, rejected.ReservationID))

	clean := run(t, s, job)
	require.Equal(t, "CLEAN", clean.Status, "%+v", clean.Anomalies)
	verifyClean(t, s)

	// The unsent reservation is gone everywhere: the seed's stated limit of
	// the default design (design.md#rules: only a durable log before QUEUED would keep
	// it); its unit is sellable again, not leaked.
	require.Equal(t, "0", s.One(t, `SELECT count(*)::text FROM inventory_reservation WHERE reservation_id = $1`, unsent.ReservationID))
	// And the sale goes on without overselling: Redis lets a buyer through,
	// PostgreSQL (sold out) refuses and the unit returns.
	_, late := s.Buy(t, 20)
	require.Equal(t, "ORDER_REJECTED", late.Result)
	s.CompensateAll(t)
	require.Equal(t, "5", s.One(t, `SELECT count(*)::text FROM orders WHERE activity_id = $1`, s.Activity))
	require.Equal(t, redisstore.Counters{Initial: 10, Available: 5, Committed: 5, Exists: true}, s.Counters(t))
}
