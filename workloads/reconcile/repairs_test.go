package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/reconcile"
	"github.com/seckill/seckill-operator/workloads/repair"
	"github.com/seckill/seckill-operator/workloads/runbook"
)

func newSale(t *testing.T, pgStock, redisStock int64) (*testsale.Sale, *reconcile.Job) {
	s := testsale.New(t, pgStock, redisStock)
	return s, &reconcile.Job{Pool: s.Pool, Redis: s.Redis, HardDeadlineGrace: time.Second}
}

func run(t *testing.T, s *testsale.Sale, job *reconcile.Job) reconcile.Report {
	t.Helper()
	rep, err := job.Run(context.Background(), s.Activity, []control.SKU{s.SKU}, time.Now())
	require.NoError(t, err)
	return rep
}

func byType(rep reconcile.Report) map[string][]reconcile.Anomaly {
	m := map[string][]reconcile.Anomaly{}
	for _, a := range rep.Anomalies {
		m[a.Type] = append(m[a.Type], a)
	}
	return m
}

// verifyClean runs the invariant queries of design.md#runbook step 6.
func verifyClean(t *testing.T, s *testsale.Sale) {
	t.Helper()
	res, err := runbook.Verify(context.Background(), s.Pool, s.Redis, s.Activity, []invariants.SKU{{ID: s.SKU.ID, Buckets: s.SKU.Buckets}}, invariants.Expect{})
	require.NoError(t, err)
	require.True(t, res.OK(), res.String())
}

// design.md#auto-repair row 1: PostgreSQL has the order, Redis still shows it queued (the
// projection lagged) or lost the reservation hash: the projection is
// rebuilt once, stock untouched; the next run finds nothing.
func TestRebuildsOrderProjectionOnce(t *testing.T) {
	s, job := newSale(t, 10, 10)
	lagging, out := s.Buy(t, 1)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)
	lost, out2 := s.Buy(t, 2)
	s.Project(t, lost, out2.OrderID)
	require.NoError(t, s.Redis.Client().Del(context.Background(), s.Slot.Reservation(lost.ReservationID)).Err())
	healthy, out3 := s.Buy(t, 3)
	s.Project(t, healthy, out3.OrderID)
	before := s.Counters(t)

	rep := run(t, s, job)
	found := byType(rep)[reconcile.RuleRebuildProjection]
	require.Len(t, found, 2, "%+v", rep.Anomalies)
	for _, a := range found {
		require.Equal(t, repair.OutcomeApplied, a.Repair.Outcome)
	}
	require.Equal(t, "REPAIRED", rep.Status)
	require.Zero(t, rep.Critical())
	require.Equal(t, "ORDER_CREATED", s.RedisStatus(t, lagging.ReservationID))
	require.Equal(t, "ORDER_CREATED", s.RedisStatus(t, lost.ReservationID))
	after := s.Counters(t)
	require.Equal(t, before.Available, after.Available, "a projection repair never changes stock")
	require.Equal(t, int64(3), after.Committed)
	require.Zero(t, after.OpenReserved)
	require.Equal(t, "2", s.One(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND rule_name = $2 AND status = 'APPLIED'`,
		s.Activity, reconcile.RuleRebuildProjection))

	again := run(t, s, job)
	require.Equal(t, "CLEAN", again.Status, "%+v", again.Anomalies)
	verifyClean(t, s)
}

// design.md#auto-repair row 2: PostgreSQL rejected the reservation and Redis still holds
// it, but the compensation task is missing: the standard task is written
// (once) and the standard compensator restores the unit.
func TestRejectionGetsItsCompensationTask(t *testing.T) {
	s, job := newSale(t, 1, 3)
	_, first := s.Buy(t, 1)
	require.Equal(t, orderstore.ResultOrderCreated, first.Result)
	msg, out := s.Buy(t, 2)
	require.Equal(t, orderstore.ReasonStockExhausted, out.Reason)
	s.Exec(t, `DELETE FROM compensation_task WHERE reservation_id = $1`, msg.ReservationID)

	rep := run(t, s, job)
	found := byType(rep)[reconcile.RuleEnsureCompensation]
	require.Len(t, found, 1, "%+v", rep.Anomalies)
	require.Equal(t, repair.OutcomeApplied, found[0].Repair.Outcome)
	require.Equal(t, "1", s.One(t, `SELECT count(*)::text FROM compensation_task WHERE reservation_id = $1`, msg.ReservationID))

	s.CompensateAll(t)
	require.Equal(t, "COMPENSATED", s.RedisStatus(t, msg.ReservationID))
	require.Equal(t, "COMPENSATED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, msg.ReservationID))
	require.Equal(t, int64(2), s.Counters(t).Available, "3 - 2 reserved + 1 compensated")
	verifyClean(t, s)
}

// design.md#auto-repair row 4: the compensation Lua ran but PostgreSQL never heard (the
// worker died after the Lua, or its retries ran out while Redis answered
// too late): the job confirms through the Lua (ALREADY_COMPENSATED) and
// completes PostgreSQL; Redis stock rose exactly once.
func TestCompletesAnAppliedCompensation(t *testing.T) {
	s, job := newSale(t, 0, 3)
	died, _ := s.Buy(t, 1)
	capped, _ := s.Buy(t, 2)
	dying := s.Compensator("dying")
	dying.Lease = time.Millisecond
	dying.Failpoint = func(name string) error { return errors.New("killed at " + name) }
	tasks, err := dying.Claim(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, tasks, 2)
	for _, task := range tasks {
		_, _, err := dying.Run(context.Background(), task)
		require.Error(t, err)
	}
	// The second one was given up as MANUAL (the worker's attempt cap).
	s.Exec(t, `UPDATE compensation_task SET status = 'MANUAL', lease_owner = NULL, lease_until = NULL WHERE reservation_id = $1`, capped.ReservationID)
	require.Equal(t, int64(3), s.Counters(t).Available, "both Lua calls restored a unit")
	time.Sleep(10 * time.Millisecond)

	rep := run(t, s, job)
	found := byType(rep)[reconcile.RuleCompleteCompensation]
	require.Len(t, found, 2, "%+v", rep.Anomalies)
	for _, rid := range []uuid.UUID{died.ReservationID, capped.ReservationID} {
		require.Equal(t, "COMPENSATED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, rid))
		require.Equal(t, "APPLIED", s.One(t, `SELECT status FROM compensation_task WHERE reservation_id = $1`, rid))
	}
	require.Equal(t, int64(3), s.Counters(t).Available, "no second increment")
	require.Zero(t, rep.Critical())
	require.Equal(t, "CLEAN", run(t, s, job).Status)
	verifyClean(t, s)
}

// design.md#auto-repair row 3: an outbox event SENDING under an expired lease (its relay
// died mid-send) is made due again; a MANUAL event goes to a person.
func TestOutboxLeaseReclaimAndManual(t *testing.T) {
	s, job := newSale(t, 5, 5)
	msg, out := s.Buy(t, 1)
	s.Project(t, msg, out.OrderID)
	msg2, out2 := s.Buy(t, 2)
	s.Project(t, msg2, out2.OrderID)
	s.Exec(t, `UPDATE event_outbox SET status = 'SENDING', lease_owner = 'dead-relay', lease_until = now() - interval '1 minute', attempt_count = 1
		WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED'`, msg.ReservationID)
	s.Exec(t, `UPDATE event_outbox SET status = 'MANUAL', attempt_count = 8, last_error = 'broker refused'
		WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED'`, msg2.ReservationID)

	rep := run(t, s, job)
	found := byType(rep)
	require.Len(t, found[reconcile.RuleOutboxReclaim], 1, "%+v", rep.Anomalies)
	require.Equal(t, repair.OutcomeApplied, found[reconcile.RuleOutboxReclaim][0].Repair.Outcome)
	require.Equal(t, "RETRY", s.One(t, `SELECT status FROM event_outbox WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED'`, msg.ReservationID))
	require.Len(t, found[reconcile.RuleOutboxManual], 1)
	require.Equal(t, repair.Manual, found[reconcile.RuleOutboxManual][0].Repair.Outcome)
	require.Equal(t, 1, rep.Critical())

	// The manual finding is recorded once however often the job runs.
	run(t, s, job)
	require.Equal(t, "1", s.One(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND rule_name = $2`, s.Activity, reconcile.RuleOutboxManual))
}

// design.md#reconcile: a Redis reservation PostgreSQL never heard of is left alone
// while its message is still to be sent or before its hard deadline, and is
// rejected for the deadline (with its compensation task) once past it —
// unless the backlog guard pauses deadline decisions. The message arriving
// afterwards meets the persisted rejection: no order.
func TestTimeoutRejectionOfAReservationPostgreSQLNeverSaw(t *testing.T) {
	s, job := newSale(t, 5, 5)
	late := s.Reserve(t, 1, -10*time.Second, true)
	unsent := s.Reserve(t, 2, -10*time.Second, false)
	early := s.Reserve(t, 3, time.Hour, true)

	control := &control.Store{Pool: s.Pool, Redis: s.Redis}
	_, err := control.SetCompensationPaused(context.Background(), s.Activity, true, "test backlog")
	require.NoError(t, err)
	rep := run(t, s, job)
	require.Empty(t, byType(rep)[reconcile.RuleTimeoutRejection], "paused: no deadline decision")
	require.Equal(t, 3, rep.InFlight)
	_, err = control.SetCompensationPaused(context.Background(), s.Activity, false, "")
	require.NoError(t, err)

	rep = run(t, s, job)
	found := byType(rep)[reconcile.RuleTimeoutRejection]
	require.Len(t, found, 1, "%+v", rep.Anomalies)
	require.Equal(t, late.ReservationID.String(), found[0].Object)
	require.Equal(t, repair.OutcomeApplied, found[0].Repair.Outcome)
	require.Equal(t, 2, rep.InFlight, "the unsent and the early one wait")
	require.Equal(t, "ORDER_REJECTED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, late.ReservationID))
	require.Equal(t, "PENDING", s.One(t, `SELECT status FROM compensation_task WHERE reservation_id = $1`, late.ReservationID))
	for _, m := range []events.OrderCreateRequested{unsent, early} {
		require.Equal(t, "0", s.One(t, `SELECT count(*)::text FROM inventory_reservation WHERE reservation_id = $1`, m.ReservationID))
	}

	raw, _ := late.Marshal()
	out, err := s.Consumer.Consume(context.Background(), late, raw)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultLateRejected, out.Result)
	require.Equal(t, "0", s.One(t, `SELECT count(*)::text FROM orders WHERE reservation_id = $1`, late.ReservationID))
	s.CompensateAll(t)
	require.Equal(t, "COMPENSATED", s.RedisStatus(t, late.ReservationID))
	verifyClean(t, s)
}

// The design.md#auto-repair "no" rows go to a person with their evidence, once:
// Redis lost a rejected reservation (no blind +1), PAID in PostgreSQL vs
// COMPENSATED in Redis (frozen), COMPENSATED in PostgreSQL vs a live Redis
// reservation, a late payment of a cancelled order (refund or fulfil).
func TestManualFindingsAreLeftForReview(t *testing.T) {
	s, job := newSale(t, 2, 6)
	ctx := context.Background()
	paid, paidOut := s.Buy(t, 1)
	s.Project(t, paid, paidOut.OrderID)
	cancelled, cancelledOut := s.Buy(t, 2)
	s.Project(t, cancelled, cancelledOut.OrderID)
	missing, _ := s.Buy(t, 3) // rejected: no stock left in PostgreSQL
	mismatch, _ := s.Buy(t, 4)
	s.CompensateAll(t)
	require.Equal(t, "COMPENSATED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, mismatch.ReservationID))

	// PAID vs COMPENSATED.
	s.Exec(t, `UPDATE orders SET status = 'PAID', paid_at = now() WHERE order_id = $1`, paidOut.OrderID)
	require.NoError(t, s.Redis.Client().HSet(ctx, s.Slot.Reservation(paid.ReservationID), "status", "COMPENSATED").Err())
	// A rejected reservation whose Redis hash is gone: its task ends MANUAL.
	s.Exec(t, `UPDATE inventory_reservation SET status = 'ORDER_REJECTED' WHERE reservation_id = $1`, missing.ReservationID)
	s.Exec(t, `UPDATE compensation_task SET status = 'MANUAL', last_result = 'RESERVATION_MISSING' WHERE reservation_id = $1`, missing.ReservationID)
	require.NoError(t, s.Redis.Client().Del(ctx, s.Slot.Reservation(missing.ReservationID), s.Slot.Compensation(missing.ReservationID)).Err())
	// PostgreSQL compensated, Redis shows the reservation live again.
	require.NoError(t, s.Redis.Client().HSet(ctx, s.Slot.Reservation(mismatch.ReservationID), "status", "RESERVED").Err())
	// A payment that came after the cancellation: the refund flow started.
	s.Exec(t, `UPDATE orders SET status = 'REFUNDING', cancelled_at = now() WHERE order_id = $1`, cancelledOut.OrderID)
	require.NoError(t, s.Redis.Client().HSet(ctx, s.Slot.Reservation(cancelled.ReservationID), "status", "CANCELLED").Err())
	s.Exec(t, `INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, status, paid_at, updated_at)
		VALUES ($1, $2, 'sim', 'txn-late', 100, 'REFUNDING', now(), now() - interval '1 second')`, ids.NewRandom(), cancelledOut.OrderID)

	rep := run(t, s, job)
	found := byType(rep)
	for rule, object := range map[string]string{
		reconcile.RuleProjectionConflict:      paid.ReservationID.String(),
		reconcile.RuleRedisReservationMissing: missing.ReservationID.String(),
		reconcile.RuleCompensatedMismatch:     mismatch.ReservationID.String(),
	} {
		require.Len(t, found[rule], 1, "%s in %+v", rule, rep.Anomalies)
		require.Equal(t, object, found[rule][0].Object)
		require.Equal(t, reconcile.Critical, found[rule][0].Severity)
		require.Equal(t, repair.Manual, found[rule][0].Repair.Outcome)
		require.NotEmpty(t, found[rule][0].Evidence["postgres"])
	}
	require.Len(t, found[reconcile.RulePaidAfterCancel], 1)
	require.Equal(t, reconcile.Warning, found[reconcile.RulePaidAfterCancel][0].Severity)
	require.GreaterOrEqual(t, rep.Critical(), 3)
	require.Zero(t, rep.AutoRepaired(), "nothing here is repaired automatically")
	require.Equal(t, "MANUAL_REVIEW", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, paid.ReservationID), "frozen")
	require.Equal(t, "PAID", s.One(t, `SELECT status FROM orders WHERE order_id = $1`, paidOut.OrderID), "the order itself is untouched")
	require.Equal(t, "COMPENSATED", s.RedisStatus(t, paid.ReservationID), "no automatic Redis change")

	again := run(t, s, job)
	require.Len(t, byType(again)[reconcile.RuleFrozen], 1, "the frozen one is only reported")
	require.Equal(t, "4", s.One(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND status = 'MANUAL'`, s.Activity),
		"each manual finding recorded once")
}

// Several runs at once over the same findings: one works (the others are
// refused), and every repair is applied exactly once.
func TestConcurrentRunsRepairOnce(t *testing.T) {
	s, job := newSale(t, 50, 50)
	for u := int64(1); u <= 20; u++ {
		s.Buy(t, u) // 20 orders, none projected
	}
	var wg sync.WaitGroup
	reports := make([]reconcile.Report, 6)
	errs := make([]error, len(reports))
	for i := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = job.Run(context.Background(), s.Activity, []control.SKU{s.SKU}, time.Now())
		}()
	}
	wg.Wait()
	applied := 0
	for i, err := range errs {
		if errors.Is(err, reconcile.ErrRunInProgress) {
			continue
		}
		require.NoError(t, err)
		applied += reports[i].AutoRepaired()
	}
	for applied < 20 { // every run was refused at once: one more after them
		rep := run(t, s, job)
		applied += rep.AutoRepaired()
		if rep.AutoRepaired() == 0 {
			break
		}
	}
	require.Equal(t, 20, applied)
	c := s.Counters(t)
	require.Equal(t, int64(20), c.Committed, "each projection applied once")
	require.Zero(t, c.OpenReserved)
	require.Equal(t, "20", s.One(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND status = 'APPLIED'`, s.Activity))
	verifyClean(t, s)
}

// A cross-system difference that moves is a sale in flight, not a loss: an
// order cancelled in PostgreSQL whose release the projector applies while
// the run looks (make chaos found runs recording a recount for a person
// because of it). One that stays put still goes to a person.
func TestMovingDifferenceIsNotARecount(t *testing.T) {
	for _, released := range []bool{true, false} {
		t.Run(map[bool]string{true: "released meanwhile", false: "never released"}[released], func(t *testing.T) {
			s, job := newSale(t, 5, 5)
			job.StillFor = time.Second
			msg, out := s.Buy(t, 1)
			s.Project(t, msg, out.OrderID)
			// The timeout cancel, in PostgreSQL only.
			cancelInPostgreSQL(t, s, msg.ReservationID, out.OrderID)
			if released {
				go func() {
					time.Sleep(300 * time.Millisecond) // the projector, a moment later
					_, err := s.Redis.ReleaseAfterCancel(context.Background(), s.Slot, msg.ReservationID, out.OrderID, time.Now(), time.Hour)
					if err != nil {
						t.Errorf("releasing: %v", err)
					}
				}()
			}
			rep := run(t, s, job)
			cross := byType(rep)[reconcile.CrossSystem]
			require.Len(t, cross, 1, "%+v", rep.Anomalies)
			if released {
				require.Equal(t, reconcile.Info, cross[0].Severity)
				require.Equal(t, true, cross[0].Evidence["moving"])
				require.Nil(t, cross[0].Repair)
			} else {
				require.Equal(t, reconcile.Critical, cross[0].Severity)
				require.NotNil(t, cross[0].Repair, "a difference that stays put goes to a person")
			}
		})
	}
}

// A reservation that moves while the run reads it — PostgreSQL cancels the
// order and the projector releases it in Redis between the run's two reads
// — is not a projection conflict (make chaos found runs freezing such
// reservations for a person): PostgreSQL is read again after Redis.
func TestReservationMovingUnderTheRunIsNotAConflict(t *testing.T) {
	s, job := newSale(t, 5, 5)
	msg, out := s.Buy(t, 1)
	s.Project(t, msg, out.OrderID)
	reconcile.SetBetweenReads(job, func() {
		cancelInPostgreSQL(t, s, msg.ReservationID, out.OrderID)
		_, err := s.Redis.ReleaseAfterCancel(context.Background(), s.Slot, msg.ReservationID, out.OrderID, time.Now(), time.Hour)
		require.NoError(t, err)
	})
	rep := run(t, s, job)
	require.Empty(t, byType(rep)[reconcile.RuleProjectionConflict], "%+v", rep.Anomalies)
	require.Equal(t, "ORDER_CREATED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, msg.ReservationID), "not frozen")
}

// A cancel whose release Redis has not applied is in flight while its
// ORDER_CANCELLED event has not been sent (a broker outage: make chaos found
// runs recording one task for a person per cancel of the outage); once the
// event was sent before the watermark and Redis still has the order, a
// person looks.
func TestCancelReleaseOnItsWayIsNotForAPerson(t *testing.T) {
	s, job := newSale(t, 5, 5)
	msg, out := s.Buy(t, 1)
	s.Project(t, msg, out.OrderID)
	cancelInPostgreSQL(t, s, msg.ReservationID, out.OrderID)
	s.Exec(t, `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
		VALUES ($1, 'ORDER', $2, 'ORDER_CANCELLED', 1, $2::uuid::text, '{}')`, ids.NewRandom(), out.OrderID)
	job.StillFor = 10 * time.Millisecond

	rep := run(t, s, job)
	require.Empty(t, byType(rep)[reconcile.RuleCancelNotProjected], "the event is not sent yet: in flight")

	s.Exec(t, `UPDATE event_outbox SET status = 'SENT', sent_at = now() - interval '1 hour' WHERE aggregate_id = $1`, out.OrderID)
	rep = run(t, s, job)
	require.Len(t, byType(rep)[reconcile.RuleCancelNotProjected], 1, "sent long ago and Redis still has the order")
}

// cancelInPostgreSQL is the timeout cancel's transaction in PostgreSQL only
// (order CANCELLED, its unit released, the RELEASE ledger entry): Redis has
// not heard of it yet.
func cancelInPostgreSQL(t *testing.T, s *testsale.Sale, reservation, order uuid.UUID) {
	t.Helper()
	s.Exec(t, `UPDATE orders SET status = 'CANCELLED', cancelled_at = clock_timestamp(), updated_at = clock_timestamp() WHERE order_id = $1`, order)
	s.Exec(t, `UPDATE sku_inventory SET available_stock = available_stock + 1, occupied_stock = occupied_stock - 1 WHERE activity_id = $1`, s.Activity)
	s.Exec(t, `INSERT INTO inventory_ledger (activity_id, sku_id, idempotency_key, entry_type, delta_available, delta_occupied, reservation_id, order_id)
		VALUES ($1, $2, 'RELEASE:' || $3::uuid::text, 'RELEASE', 1, -1, $4, $3::uuid)`, s.Activity, testsale.SKUID, order, reservation)
}
