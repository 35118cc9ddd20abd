package reconcile

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/repair"
	"github.com/seckill/seckill-operator/workloads/states"
)

const pageSize = 500

// resRow is one reservation as PostgreSQL has it.
type resRow struct {
	ID                   uuid.UUID
	Status               states.ReservationStatus
	Version              int64
	Bucket               int
	User                 int64
	Request, Message     uuid.UUID
	Order                *uuid.UUID
	ReservedAt, Deadline time.Time
	OrderStatus          states.OrderStatus
	TaskID               *uuid.UUID
	TaskStatus           states.TaskStatus
	TaskKey              string
	TaskLive             bool
	TaskResult           string
	slot                 redisstore.Slot
	redis                redisstore.Hash
	marker               string
}

func (r resRow) observed() observed {
	return observed{PG: r.Status, Order: r.OrderStatus, Task: r.TaskStatus, TaskLive: r.TaskLive,
		RedisExists: r.redis != nil, Redis: r.redis.Status(), Marker: r.marker != "" && r.marker == r.TaskKey}
}

func (r resRow) evidence() map[string]any {
	ev := map[string]any{
		"postgres": map[string]any{"reservation_status": string(r.Status), "version": r.Version, "order_id": r.Order,
			"order_status": r.OrderStatus, "request_id": r.Request, "message_id": r.Message, "user_id": r.User,
			"bucket": r.Bucket, "compensation_task": r.TaskID, "compensation_task_status": r.TaskStatus,
			"compensation_last_result": r.TaskResult},
		"redis": map[string]any{"slot": r.slot.Tag(), "reservation": r.redis, "compensation_marker": r.marker},
	}
	return ev
}

// checkReservations walks a SKU's reservations older than the watermark.
func (run *pass) checkReservations(ctx context.Context, sku control.SKU) error {
	after := uuid.Nil
	for {
		page, err := run.scan(ctx, sku.ID, after)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		if run.job.betweenReads != nil {
			run.job.betweenReads()
		}
		if err := run.loadRedis(ctx, page); err != nil {
			return err
		}
		// PostgreSQL decides first and Redis follows (the projection), so
		// PostgreSQL is read again after Redis: a Redis state ahead of the
		// PostgreSQL one is then a real conflict, never a transition made
		// between the two reads. A row that moved meanwhile (it left the
		// watermark) is checked by the next run.
		fresh, err := run.scan(ctx, sku.ID, after)
		if err != nil {
			return err
		}
		now := make(map[uuid.UUID]resRow, len(fresh))
		for _, r := range fresh {
			now[r.ID] = r
		}
		for i := range page {
			r, ok := now[page[i].ID]
			if !ok {
				run.rep.InFlight++
				continue
			}
			r.redis, r.marker = page[i].redis, page[i].marker
			run.rep.Checked++
			if err := run.apply(ctx, sku.ID, &r); err != nil {
				return err
			}
		}
		after = page[len(page)-1].ID
	}
}

// scan reads one page of the SKU's reservations after the id, older than
// the watermark (reservations_scan.sql).
func (run *pass) scan(ctx context.Context, sku int64, after uuid.UUID) ([]resRow, error) {
	rows, err := run.job.Pool.Query(ctx, qReservationsScan, run.rep.Activity, sku, after, run.rep.Watermark, pageSize)
	if err != nil {
		return nil, fmt.Errorf("reading reservations of sku %d: %w", sku, err)
	}
	page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (resRow, error) {
		var r resRow
		err := row.Scan(&r.ID, &r.Status, &r.Version, &r.Bucket, &r.User, &r.Request, &r.Message, &r.Order,
			&r.ReservedAt, &r.Deadline, &r.OrderStatus, &r.TaskID, &r.TaskStatus, &r.TaskKey, &r.TaskLive, &r.TaskResult)
		r.slot = redisstore.Slot{ActivityID: run.rep.Activity, SKUID: sku, Bucket: r.Bucket}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading reservations of sku %d: %w", sku, err)
	}
	return page, nil
}

// loadRedis reads each reservation's hash and compensation marker in one pipeline.
func (run *pass) loadRedis(ctx context.Context, page []resRow) error {
	c := run.job.Redis.Client()
	pipe := c.Pipeline()
	hashes := make([]*redis.MapStringStringCmd, len(page))
	markers := make([]*redis.StringCmd, len(page))
	for i, r := range page {
		hashes[i] = pipe.HGetAll(ctx, r.slot.Reservation(r.ID))
		markers[i] = pipe.Get(ctx, r.slot.Compensation(r.ID))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading Redis reservations: %w", err)
	}
	for i := range page {
		if m := hashes[i].Val(); len(m) > 0 {
			page[i].redis = m
		}
		page[i].marker = markers[i].Val()
	}
	return nil
}

// apply turns one reservation's decision into a repair, a manual task or nothing.
func (run *pass) apply(ctx context.Context, sku int64, r *resRow) error {
	d := decide(r.observed())
	if d.Rule == "" {
		return nil
	}
	a := Anomaly{Type: d.Rule, Severity: d.Severity, SKU: sku, Object: r.ID.String(), Evidence: r.evidence()}
	if d.Rule == RuleFrozen {
		run.add(a)
		return nil
	}
	if d.Rule == RuleCancelNotProjected && r.Order != nil {
		// The release travels as an outbox event: while the relay has not
		// sent it, or sent it only lately (a broker outage), Redis lagging
		// is the projection on its way, not a loss.
		var inFlight bool
		if err := run.job.Pool.QueryRow(ctx, qReleaseInFlight, *r.Order, run.rep.Watermark).Scan(&inFlight); err != nil {
			return fmt.Errorf("reading the cancel event of order %s: %w", *r.Order, err)
		}
		if inFlight {
			run.rep.InFlight++
			return nil
		}
	}
	t := repair.New(run.rep.Activity, repair.ObjectReservation, r.ID.String(), d.Rule, r.Version, d.Target)
	t.Evidence, t.Before, t.RunID = a.Evidence, a.Evidence, &run.runID
	if !d.Auto {
		t.Operator, t.Reason = "reconcile", "needs a person: "+d.Rule
		if err := run.manual(ctx, &a, &t); err != nil {
			return err
		}
		if d.Freeze {
			_, err := run.repairs.Freeze(ctx, r.ID, repair.Audit{Operator: "reconcile", Reason: d.Rule + " (design.md#auto-repair: freeze and review)"},
				a.Evidence, &run.runID)
			if err != nil && !errors.Is(err, repair.ErrFrozen) {
				return err
			}
			a.Evidence["frozen"] = err == nil
		}
		run.add(a)
		return nil
	}
	t.Operator, t.Reason, t.Automatic = "reconcile", "design.md#auto-repair automatic repair: "+d.Rule, true
	return run.auto(ctx, a, &t, run.step(d.Rule, r))
}

// step is the standard state machine step of an automatic rule.
func (run *pass) step(rule string, r *resRow) repair.Step {
	switch rule {
	case RuleRebuildProjection:
		return run.steps.RebuildProjection(r.ID)
	case RuleEnsureCompensation:
		return run.steps.EnsureCompensation(r.ID)
	case RuleCompleteCompensation:
		return run.steps.Compensate(r.ID, r.TaskStatus == states.TaskManual)
	}
	return func(context.Context) (any, string, error) { return nil, "", fmt.Errorf("no step for rule %s", rule) }
}

// checkOpen walks the Redis reservations PostgreSQL has not decided, older
// than the watermark (design.md#reconcile load_redis_pending_before): one PostgreSQL
// never heard of is left while its message is still to be sent, rejected
// for the deadline once its hard deadline passed, left pending otherwise.
func (run *pass) checkOpen(ctx context.Context, sku control.SKU) error {
	rs := run.job.Redis
	for _, sl := range sku.Slots(run.rep.Activity) {
		members, err := rs.Client().ZRangeByScore(ctx, sl.Open(), &redis.ZRangeBy{Min: "-inf",
			Max: strconv.FormatInt(run.rep.Watermark.UnixMilli(), 10)}).Result()
		if err != nil {
			return fmt.Errorf("reading %s: %w", sl.Open(), err)
		}
		for start := 0; start < len(members); start += pageSize {
			end := min(start+pageSize, len(members))
			if err := run.checkOpenPage(ctx, sku.ID, sl, members[start:end]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (run *pass) checkOpenPage(ctx context.Context, sku int64, sl redisstore.Slot, members []string) error {
	ids := make([]uuid.UUID, 0, len(members))
	for _, m := range members {
		id, err := uuid.Parse(m)
		if err != nil {
			run.add(Anomaly{Type: RuleStateConflict, Severity: Critical, SKU: sku, Object: m,
				Evidence: map[string]any{"redis": "open set member is not a reservation id", "slot": sl.Tag()}})
			continue
		}
		ids = append(ids, id)
	}
	rows, err := run.job.Pool.Query(ctx, qReservationsKnown, ids)
	if err != nil {
		return fmt.Errorf("looking up open reservations: %w", err)
	}
	known, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return fmt.Errorf("looking up open reservations: %w", err)
	}
	inPG := map[uuid.UUID]bool{}
	for _, id := range known {
		inPG[id] = true // decided in PostgreSQL: the reservation pass covers it
	}
	for _, id := range ids {
		if inPG[id] {
			continue
		}
		run.rep.Checked++
		if err := run.openReservation(ctx, sku, sl, id); err != nil {
			return err
		}
	}
	return nil
}

func (run *pass) openReservation(ctx context.Context, sku int64, sl redisstore.Slot, id uuid.UUID) error {
	rs := run.job.Redis
	h, err := rs.Reservation(ctx, sl, id)
	if err != nil {
		return err
	}
	ev := map[string]any{"redis": map[string]any{"slot": sl.Tag(), "reservation": h}, "postgres": "no reservation row"}
	if h == nil {
		a := Anomaly{Type: RuleRedisReservationMissing, Severity: Critical, SKU: sku, Object: id.String(), Evidence: ev}
		t := repair.New(run.rep.Activity, repair.ObjectReservation, id.String(), a.Type, 0, string(states.ReservationManualReview))
		t.Evidence, t.RunID, t.Operator, t.Reason = ev, &run.runID, "reconcile", "open Redis entry without a hash or a PostgreSQL row: activity-level recount"
		if err := run.manual(ctx, &a, &t); err != nil {
			return err
		}
		run.add(a)
		return nil
	}
	if _, err := rs.Client().ZScore(ctx, sl.SendDue(), id.String()).Result(); err == nil {
		run.rep.InFlight++ // still to be sent (or resent): message_is_still_inflight
		return nil
	} else if !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading %s: %w", sl.SendDue(), err)
	}
	msg, parseErr := events.FromReservationHash(h)
	if parseErr != nil {
		// A hash that cannot be read back is evidence, not a reason to stop the pass.
		a := Anomaly{Type: RuleStateConflict, Severity: Critical, SKU: sku, Object: id.String(), Evidence: ev}
		a.Evidence["error"] = parseErr.Error()
		run.add(a)
		return nil //nolint:nilerr // recorded as an anomaly
	}
	if run.now().Before(msg.BusinessDeadline.Add(run.job.hardDeadlineGrace())) {
		run.rep.InFlight++ // published, not consumed yet: leave it pending
		return nil
	}
	if run.paused {
		run.rep.InFlight++ // the backlog guard pauses deadline decisions
		return nil
	}
	a := Anomaly{Type: RuleTimeoutRejection, Severity: Warning, SKU: sku, Object: id.String(), Evidence: ev}
	t := repair.New(run.rep.Activity, repair.ObjectReservation, id.String(), a.Type, 0, string(states.ReservationOrderRejected))
	t.Evidence, t.RunID, t.Operator, t.Automatic = ev, &run.runID, "reconcile", true
	t.Reason = "design.md#reconcile: never reached PostgreSQL, past its hard deadline"
	consumer := &orderstore.Consumer{Pool: run.job.Pool, EventsTopic: run.job.EventsTopic}
	return run.auto(ctx, a, &t, func(ctx context.Context) (any, string, error) {
		out, err := consumer.RejectTimedOut(ctx, msg)
		if err != nil {
			return nil, "orderstore.RejectTimedOut", err
		}
		if out.Result == "COMPENSATION_PAUSED" {
			return nil, "orderstore.RejectTimedOut", errors.New("the backlog guard paused deadline decisions meanwhile")
		}
		return map[string]any{"result": out.Result, "reason": out.Reason}, "orderstore.RejectTimedOut", nil
	})
}

// checkOutbox reclaims expired SENDING leases and reports MANUAL events.
func (run *pass) checkOutbox(ctx context.Context) error {
	rows, err := run.job.Pool.Query(ctx, qOutboxStale, run.rep.Activity, run.rep.Watermark, 1000)
	if err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	type ev struct {
		ID         uuid.UUID
		Type       string
		Status     states.OutboxStatus
		Attempts   int64
		Owner      string
		LeaseUntil *time.Time
		LastError  string
		Created    time.Time
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ev, error) {
		var e ev
		return e, r.Scan(&e.ID, &e.Type, &e.Status, &e.Attempts, &e.Owner, &e.LeaseUntil, &e.LastError, &e.Created)
	})
	if err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	for _, e := range list {
		evidence := map[string]any{"event_type": e.Type, "status": e.Status, "attempts": e.Attempts,
			"lease_owner": e.Owner, "lease_until": e.LeaseUntil, "last_error": e.LastError, "created_at": e.Created}
		a := Anomaly{Type: RuleOutboxReclaim, Severity: Warning, Object: e.ID.String(), Evidence: evidence}
		if e.Status == states.OutboxManual {
			a.Type, a.Severity = RuleOutboxManual, Critical
			t := repair.New(run.rep.Activity, repair.ObjectOutbox, e.ID.String(), a.Type, e.Attempts, string(states.ReservationManualReview))
			t.Evidence, t.RunID, t.Operator, t.Reason = evidence, &run.runID, "reconcile", "outbox event past its attempt cap"
			if err := run.manual(ctx, &a, &t); err != nil {
				return err
			}
			run.add(a)
			continue
		}
		t := repair.New(run.rep.Activity, repair.ObjectOutbox, e.ID.String(), a.Type, e.Attempts, string(states.OutboxRetry))
		t.Evidence, t.Before, t.RunID, t.Operator, t.Automatic = evidence, evidence, &run.runID, "reconcile", true
		t.Reason = "design.md#auto-repair: SENDING with an expired lease"
		if err := run.auto(ctx, a, &t, run.steps.ReclaimOutbox(e.ID, run.rep.Watermark)); err != nil {
			return err
		}
	}
	return nil
}

// checkPayments reports successful payments of cancelled orders.
func (run *pass) checkPayments(ctx context.Context) error {
	rows, err := run.job.Pool.Query(ctx, qPaymentsAfterCancel, run.rep.Activity, run.rep.Watermark)
	if err != nil {
		return fmt.Errorf("reading payments of cancelled orders: %w", err)
	}
	type pay struct {
		ID, Order     uuid.UUID
		Provider, Txn string
		Amount        int64
		Status        states.PaymentStatus
		OrderStatus   states.OrderStatus
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pay, error) {
		var p pay
		return p, r.Scan(&p.ID, &p.Order, &p.Provider, &p.Txn, &p.Amount, &p.Status, &p.OrderStatus)
	})
	if err != nil {
		return fmt.Errorf("reading payments of cancelled orders: %w", err)
	}
	for _, p := range list {
		evidence := map[string]any{"payment_id": p.ID, "order_id": p.Order, "provider": p.Provider,
			"provider_transaction_id": p.Txn, "amount_cents": p.Amount, "payment_status": p.Status, "order_status": p.OrderStatus}
		a := Anomaly{Type: RulePaidAfterCancel, Severity: Warning, Object: p.ID.String(), Evidence: evidence}
		if p.Status == states.PaymentSuccess {
			a.Type, a.Severity = RulePaidCancelledGuard, Critical
		}
		t := repair.New(run.rep.Activity, repair.ObjectPayment, p.ID.String(), a.Type, 0, "BUSINESS_DECISION")
		t.Evidence, t.RunID, t.Operator, t.Reason = evidence, &run.runID, "reconcile", "refund or fulfil: a business decision (design.md#auto-repair)"
		if err := run.manual(ctx, &a, &t); err != nil {
			return err
		}
		run.add(a)
	}
	return nil
}

func repairRef(t *repair.Task, outcome string) *RepairRef {
	return &RepairRef{ID: hex.EncodeToString(t.ID), Rule: t.Rule, Outcome: outcome}
}
