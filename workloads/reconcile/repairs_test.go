package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/reconcile"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/repair"
	"github.com/seckill/seckill-operator/workloads/runbook"
	"github.com/seckill/seckill-operator/workloads/testenv"
)

// sale is one SKU of a fresh activity on the real PostgreSQL and Redis,
// with more Redis stock than PostgreSQL stock when a test wants rejections.
type sale struct {
	pool     *pgxpool.Pool
	rs       *redisstore.Store
	activity int64
	sku      control.SKU
	slot     redisstore.Slot
	consumer *orderstore.Consumer
	ring     *ids.Keyring
	job      *reconcile.Job
}

const skuID = 1

func newSale(t *testing.T, pgStock, redisStock int64) *sale {
	t.Helper()
	ctx := context.Background()
	pool := testenv.Database(t)
	c := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(ctx, c))
	rs := redisstore.New(c)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	sku := control.SKU{ID: skuID, Stock: redisStock, Buckets: 1}
	slot := sku.Slots(activity)[0]
	_, _, err := rs.Provision(ctx, slot, redisStock, 1)
	require.NoError(t, err)
	require.NoError(t, rs.SetWindow(ctx, slot, redisstore.WindowActive))
	_, err = pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`,
		activity, skuID, pgStock)
	require.NoError(t, err)
	ring, _ := ids.NewKeyring(1, map[byte][]byte{1: []byte("reconcile-test-key-0123456789abcd")})
	return &sale{pool: pool, rs: rs, activity: activity, sku: sku, slot: slot, ring: ring,
		consumer: &orderstore.Consumer{Pool: pool, Group: "g", PaymentWindow: time.Hour},
		job:      &reconcile.Job{Pool: pool, Redis: rs, HardDeadlineGrace: time.Second}}
}

// reserve takes a Redis reservation as the gateway does; deadline is the
// business deadline relative to now; sent says whether the message left
// (send_due acknowledged) or is still to be sent.
func (s *sale) reserve(t *testing.T, user int64, deadline time.Duration, sent bool) events.OrderCreateRequested {
	t.Helper()
	ctx := context.Background()
	now := time.Now().Add(-2 * time.Second) // older than the watermark
	req := ids.NewRandom()
	rid := s.ring.ReservationID(ids.ReservationKey{ActivityID: s.activity, SKUID: skuID, UserID: user, RequestID: req})
	mid, _ := s.ring.MessageID(rid, 1)
	res, err := s.rs.Reserve(ctx, redisstore.ReserveRequest{Slot: s.slot, ReservationID: rid, MessageID: mid, RequestID: req,
		UserID: user, Now: now, BusinessDeadline: time.Now().Add(deadline), SendDue: now,
		RequestTTL: time.Minute, SchemaVersion: 1, KeyVersion: 1})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.Code)
	h, err := s.rs.Reservation(ctx, s.slot, rid)
	require.NoError(t, err)
	msg, err := events.FromReservationHash(h)
	require.NoError(t, err)
	if sent {
		claims, err := s.rs.ClaimDue(ctx, s.slot, time.Now(), time.Minute, 1000)
		require.NoError(t, err)
		for _, c := range claims {
			if c.ReservationID == rid {
				_, err := s.rs.AckSend(ctx, s.slot, rid, c.Lease, time.Now())
				require.NoError(t, err)
			}
		}
	}
	return msg
}

// buy reserves and consumes the message in PostgreSQL (no projection yet).
func (s *sale) buy(t *testing.T, user int64) (events.OrderCreateRequested, orderstore.Outcome) {
	t.Helper()
	msg := s.reserve(t, user, time.Hour, true)
	raw, _ := msg.Marshal()
	out, err := s.consumer.Consume(context.Background(), msg, raw)
	require.NoError(t, err)
	return msg, out
}

// project is the projector's step for a created order.
func (s *sale) project(t *testing.T, msg events.OrderCreateRequested, order uuid.UUID) {
	t.Helper()
	res, err := s.rs.ProjectOrderCreated(context.Background(), s.slot, msg.ReservationID, order, time.Now())
	require.NoError(t, err)
	require.True(t, res.OK(), res.Reason)
}

func (s *sale) compensator(owner string) *compensation.Worker {
	return &compensation.Worker{Pool: s.pool, Redis: s.rs, Owner: owner, Lease: 30 * time.Second, MaxAttempts: 5, TerminalTTL: time.Hour}
}

func (s *sale) compensateAll(t *testing.T) {
	t.Helper()
	w := s.compensator("test")
	tasks, err := w.Claim(context.Background(), 100)
	require.NoError(t, err)
	for _, task := range tasks {
		_, _, err := w.Run(context.Background(), task)
		require.NoError(t, err)
	}
}

func (s *sale) run(t *testing.T) reconcile.Report {
	t.Helper()
	rep, err := s.job.Run(context.Background(), s.activity, []control.SKU{s.sku}, time.Now())
	require.NoError(t, err)
	return rep
}

func (s *sale) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := s.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func (s *sale) one(t *testing.T, sql string, args ...any) string {
	t.Helper()
	var v string
	require.NoError(t, s.pool.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

func (s *sale) redisStatus(t *testing.T, rid uuid.UUID) string {
	t.Helper()
	h, err := s.rs.Reservation(context.Background(), s.slot, rid)
	require.NoError(t, err)
	return h["status"]
}

func (s *sale) counters(t *testing.T) redisstore.Counters {
	t.Helper()
	c, err := s.rs.ReadCounters(context.Background(), s.slot)
	require.NoError(t, err)
	return c
}

func byType(rep reconcile.Report) map[string][]reconcile.Anomaly {
	m := map[string][]reconcile.Anomaly{}
	for _, a := range rep.Anomalies {
		m[a.Type] = append(m[a.Type], a)
	}
	return m
}

// verifyClean runs the invariant queries of seed §11.6 step 6.
func verifyClean(t *testing.T, s *sale) {
	t.Helper()
	res, err := runbook.Verify(context.Background(), s.pool, s.activity)
	require.NoError(t, err)
	require.True(t, res.Clean(), "%+v", res)
}

// §11.5 row 1: PostgreSQL has the order, Redis still shows it queued (the
// projection lagged) or lost the reservation hash: the projection is
// rebuilt once, stock untouched; the next run finds nothing.
func TestRebuildsOrderProjectionOnce(t *testing.T) {
	s := newSale(t, 10, 10)
	lagging, out := s.buy(t, 1)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)
	lost, out2 := s.buy(t, 2)
	s.project(t, lost, out2.OrderID)
	require.NoError(t, s.rs.Client().Del(context.Background(), s.slot.Reservation(lost.ReservationID)).Err())
	healthy, out3 := s.buy(t, 3)
	s.project(t, healthy, out3.OrderID)
	before := s.counters(t)

	rep := s.run(t)
	found := byType(rep)[reconcile.RuleRebuildProjection]
	require.Len(t, found, 2, "%+v", rep.Anomalies)
	for _, a := range found {
		require.Equal(t, repair.OutcomeApplied, a.Repair.Outcome)
	}
	require.Equal(t, "REPAIRED", rep.Status)
	require.Zero(t, rep.Critical())
	require.Equal(t, "ORDER_CREATED", s.redisStatus(t, lagging.ReservationID))
	require.Equal(t, "ORDER_CREATED", s.redisStatus(t, lost.ReservationID))
	after := s.counters(t)
	require.Equal(t, before.Available, after.Available, "a projection repair never changes stock")
	require.Equal(t, int64(3), after.Committed)
	require.Zero(t, after.OpenReserved)
	require.Equal(t, "2", s.one(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND rule_name = $2 AND status = 'APPLIED'`,
		s.activity, reconcile.RuleRebuildProjection))

	again := s.run(t)
	require.Equal(t, "CLEAN", again.Status, "%+v", again.Anomalies)
	verifyClean(t, s)
}

// §11.5 row 2: PostgreSQL rejected the reservation and Redis still holds
// it, but the compensation task is missing: the standard task is written
// (once) and the standard compensator restores the unit.
func TestRejectionGetsItsCompensationTask(t *testing.T) {
	s := newSale(t, 1, 3)
	_, first := s.buy(t, 1)
	require.Equal(t, orderstore.ResultOrderCreated, first.Result)
	msg, out := s.buy(t, 2)
	require.Equal(t, orderstore.ReasonStockExhausted, out.Reason)
	s.exec(t, `DELETE FROM compensation_task WHERE reservation_id = $1`, msg.ReservationID)

	rep := s.run(t)
	found := byType(rep)[reconcile.RuleEnsureCompensation]
	require.Len(t, found, 1, "%+v", rep.Anomalies)
	require.Equal(t, repair.OutcomeApplied, found[0].Repair.Outcome)
	require.Equal(t, "1", s.one(t, `SELECT count(*)::text FROM compensation_task WHERE reservation_id = $1`, msg.ReservationID))

	s.compensateAll(t)
	require.Equal(t, "COMPENSATED", s.redisStatus(t, msg.ReservationID))
	require.Equal(t, "COMPENSATED", s.one(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, msg.ReservationID))
	require.Equal(t, int64(2), s.counters(t).Available, "3 - 2 reserved + 1 compensated")
	verifyClean(t, s)
}

// §11.5 row 4: the compensation Lua ran but PostgreSQL never heard (the
// worker died after the Lua, or its retries ran out while Redis answered
// too late): the job confirms through the Lua (ALREADY_COMPENSATED) and
// completes PostgreSQL; Redis stock rose exactly once.
func TestCompletesAnAppliedCompensation(t *testing.T) {
	s := newSale(t, 0, 3)
	died, _ := s.buy(t, 1)
	capped, _ := s.buy(t, 2)
	dying := s.compensator("dying")
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
	s.exec(t, `UPDATE compensation_task SET status = 'MANUAL', lease_owner = NULL, lease_until = NULL WHERE reservation_id = $1`, capped.ReservationID)
	require.Equal(t, int64(3), s.counters(t).Available, "both Lua calls restored a unit")
	time.Sleep(10 * time.Millisecond)

	rep := s.run(t)
	found := byType(rep)[reconcile.RuleCompleteCompensation]
	require.Len(t, found, 2, "%+v", rep.Anomalies)
	for _, rid := range []uuid.UUID{died.ReservationID, capped.ReservationID} {
		require.Equal(t, "COMPENSATED", s.one(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, rid))
		require.Equal(t, "APPLIED", s.one(t, `SELECT status FROM compensation_task WHERE reservation_id = $1`, rid))
	}
	require.Equal(t, int64(3), s.counters(t).Available, "no second increment")
	require.Zero(t, rep.Critical())
	require.Equal(t, "CLEAN", s.run(t).Status)
	verifyClean(t, s)
}

// §11.5 row 3: an outbox event SENDING under an expired lease (its relay
// died mid-send) is made due again; a MANUAL event goes to a person.
func TestOutboxLeaseReclaimAndManual(t *testing.T) {
	s := newSale(t, 5, 5)
	msg, out := s.buy(t, 1)
	s.project(t, msg, out.OrderID)
	msg2, out2 := s.buy(t, 2)
	s.project(t, msg2, out2.OrderID)
	s.exec(t, `UPDATE event_outbox SET status = 'SENDING', lease_owner = 'dead-relay', lease_until = now() - interval '1 minute', attempt_count = 1
		WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED'`, msg.ReservationID)
	s.exec(t, `UPDATE event_outbox SET status = 'MANUAL', attempt_count = 8, last_error = 'broker refused'
		WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED'`, msg2.ReservationID)

	rep := s.run(t)
	found := byType(rep)
	require.Len(t, found[reconcile.RuleOutboxReclaim], 1, "%+v", rep.Anomalies)
	require.Equal(t, repair.OutcomeApplied, found[reconcile.RuleOutboxReclaim][0].Repair.Outcome)
	require.Equal(t, "RETRY", s.one(t, `SELECT status FROM event_outbox WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED'`, msg.ReservationID))
	require.Len(t, found[reconcile.RuleOutboxManual], 1)
	require.Equal(t, repair.Manual, found[reconcile.RuleOutboxManual][0].Repair.Outcome)
	require.Equal(t, 1, rep.Critical())

	// The manual finding is recorded once however often the job runs.
	s.run(t)
	require.Equal(t, "1", s.one(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND rule_name = $2`, s.activity, reconcile.RuleOutboxManual))
}

// seed §13.5: a Redis reservation PostgreSQL never heard of is left alone
// while its message is still to be sent or before its hard deadline, and is
// rejected for the deadline (with its compensation task) once past it —
// unless the backlog guard pauses deadline decisions. The message arriving
// afterwards meets the persisted rejection: no order.
func TestTimeoutRejectionOfAReservationPostgreSQLNeverSaw(t *testing.T) {
	s := newSale(t, 5, 5)
	late := s.reserve(t, 1, -10*time.Second, true)
	unsent := s.reserve(t, 2, -10*time.Second, false)
	early := s.reserve(t, 3, time.Hour, true)

	control := &control.Store{Pool: s.pool, Redis: s.rs}
	_, err := control.SetCompensationPaused(context.Background(), s.activity, true, "test backlog")
	require.NoError(t, err)
	rep := s.run(t)
	require.Empty(t, byType(rep)[reconcile.RuleTimeoutRejection], "paused: no deadline decision")
	require.Equal(t, 3, rep.InFlight)
	_, err = control.SetCompensationPaused(context.Background(), s.activity, false, "")
	require.NoError(t, err)

	rep = s.run(t)
	found := byType(rep)[reconcile.RuleTimeoutRejection]
	require.Len(t, found, 1, "%+v", rep.Anomalies)
	require.Equal(t, late.ReservationID.String(), found[0].Object)
	require.Equal(t, repair.OutcomeApplied, found[0].Repair.Outcome)
	require.Equal(t, 2, rep.InFlight, "the unsent and the early one wait")
	require.Equal(t, "ORDER_REJECTED", s.one(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, late.ReservationID))
	require.Equal(t, "PENDING", s.one(t, `SELECT status FROM compensation_task WHERE reservation_id = $1`, late.ReservationID))
	for _, m := range []events.OrderCreateRequested{unsent, early} {
		require.Equal(t, "0", s.one(t, `SELECT count(*)::text FROM inventory_reservation WHERE reservation_id = $1`, m.ReservationID))
	}

	raw, _ := late.Marshal()
	out, err := s.consumer.Consume(context.Background(), late, raw)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultLateRejected, out.Result)
	require.Equal(t, "0", s.one(t, `SELECT count(*)::text FROM orders WHERE reservation_id = $1`, late.ReservationID))
	s.compensateAll(t)
	require.Equal(t, "COMPENSATED", s.redisStatus(t, late.ReservationID))
	verifyClean(t, s)
}

// The §11.5 "no" rows go to a person with their evidence, once:
// Redis lost a rejected reservation (no blind +1), PAID in PostgreSQL vs
// COMPENSATED in Redis (frozen), COMPENSATED in PostgreSQL vs a live Redis
// reservation, a late payment of a cancelled order (refund or fulfil).
func TestManualFindingsAreLeftForReview(t *testing.T) {
	s := newSale(t, 2, 6)
	ctx := context.Background()
	paid, paidOut := s.buy(t, 1)
	s.project(t, paid, paidOut.OrderID)
	cancelled, cancelledOut := s.buy(t, 2)
	s.project(t, cancelled, cancelledOut.OrderID)
	missing, _ := s.buy(t, 3) // rejected: no stock left in PostgreSQL
	mismatch, _ := s.buy(t, 4)
	s.compensateAll(t)
	require.Equal(t, "COMPENSATED", s.one(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, mismatch.ReservationID))

	// PAID vs COMPENSATED.
	s.exec(t, `UPDATE orders SET status = 'PAID', paid_at = now() WHERE order_id = $1`, paidOut.OrderID)
	require.NoError(t, s.rs.Client().HSet(ctx, s.slot.Reservation(paid.ReservationID), "status", "COMPENSATED").Err())
	// A rejected reservation whose Redis hash is gone: its task ends MANUAL.
	s.exec(t, `UPDATE inventory_reservation SET status = 'ORDER_REJECTED' WHERE reservation_id = $1`, missing.ReservationID)
	s.exec(t, `UPDATE compensation_task SET status = 'MANUAL', last_result = 'RESERVATION_MISSING' WHERE reservation_id = $1`, missing.ReservationID)
	require.NoError(t, s.rs.Client().Del(ctx, s.slot.Reservation(missing.ReservationID), s.slot.Compensation(missing.ReservationID)).Err())
	// PostgreSQL compensated, Redis shows the reservation live again.
	require.NoError(t, s.rs.Client().HSet(ctx, s.slot.Reservation(mismatch.ReservationID), "status", "RESERVED").Err())
	// A payment that came after the cancellation: the refund flow started.
	s.exec(t, `UPDATE orders SET status = 'REFUNDING', cancelled_at = now() WHERE order_id = $1`, cancelledOut.OrderID)
	require.NoError(t, s.rs.Client().HSet(ctx, s.slot.Reservation(cancelled.ReservationID), "status", "CANCELLED").Err())
	s.exec(t, `INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, status, paid_at, updated_at)
		VALUES ($1, $2, 'sim', 'txn-late', 100, 'REFUNDING', now(), now() - interval '1 second')`, ids.NewRandom(), cancelledOut.OrderID)

	rep := s.run(t)
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
	require.Equal(t, "MANUAL_REVIEW", s.one(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, paid.ReservationID), "frozen")
	require.Equal(t, "PAID", s.one(t, `SELECT status FROM orders WHERE order_id = $1`, paidOut.OrderID), "the order itself is untouched")
	require.Equal(t, "COMPENSATED", s.redisStatus(t, paid.ReservationID), "no automatic Redis change")

	again := s.run(t)
	require.Len(t, byType(again)[reconcile.RuleFrozen], 1, "the frozen one is only reported")
	require.Equal(t, "4", s.one(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND status = 'MANUAL'`, s.activity),
		"each manual finding recorded once")
}

// Several runs at once over the same findings: one works (the others are
// refused), and every repair is applied exactly once.
func TestConcurrentRunsRepairOnce(t *testing.T) {
	s := newSale(t, 50, 50)
	for u := int64(1); u <= 20; u++ {
		s.buy(t, u) // 20 orders, none projected
	}
	var wg sync.WaitGroup
	reports := make([]reconcile.Report, 6)
	errs := make([]error, len(reports))
	for i := range reports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = s.job.Run(context.Background(), s.activity, []control.SKU{s.sku}, time.Now())
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
		rep := s.run(t)
		applied += rep.AutoRepaired()
		if rep.AutoRepaired() == 0 {
			break
		}
	}
	require.Equal(t, 20, applied)
	c := s.counters(t)
	require.Equal(t, int64(20), c.Committed, "each projection applied once")
	require.Zero(t, c.OpenReserved)
	require.Equal(t, "20", s.one(t, `SELECT count(*)::text FROM repair_task WHERE activity_id = $1 AND status = 'APPLIED'`, s.activity))
	verifyClean(t, s)
}
