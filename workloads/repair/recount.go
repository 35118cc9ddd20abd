package repair

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
)

// RuleRecount is the manual repair of a cross-system difference that no
// single reservation explains (Redis lost writes): the activity-level stock
// calibration of design.md#faults, design.md#runbook, one SKU at a time.
const RuleRecount = "REDIS_RECOUNT"

var (
	qRecountCommitted   = sqlfile.Must(sqlFiles, "recount_committed")
	qRecountOpenDecided = sqlfile.Must(sqlFiles, "recount_open_decided")
	qRecountCancelled   = sqlfile.Must(sqlFiles, "recount_cancelled")
	qRecountApplied     = sqlfile.Must(sqlFiles, "recount_applied")
	qCloseByRecount     = sqlfile.Must(sqlFiles, "close_by_recount")
	errPostgresMovedOn  = errors.New("PostgreSQL's ledger moved while the bucket was recounted")
)

const (
	recountAttempts      = 5 // counts of a bucket before giving up while PostgreSQL keeps moving
	recountPendingSample = 5 // pending reservations named in the refusal
)

// ErrPropagationPending: a recount now would count a unit twice; the
// projector (or the reconcile job's rebuild) has to catch up first.
var ErrPropagationPending = errors.New("a projection or release is still pending in Redis")

// SKUObject is the object id of a SKU's repair tasks.
func SKUObject(sku int64) string { return strconv.FormatInt(sku, 10) }

// BucketRecount is one bucket's calibration.
type BucketRecount struct {
	Bucket string              `json:"bucket"`
	Result string              `json:"result"`
	Before redisstore.Counters `json:"before"`
	After  redisstore.Counters `json:"after"`
	// PostgresCommitted is occupied + sold of the bucket's orders.
	PostgresCommitted int64 `json:"postgres_committed"`
	// LedgerMark is the SKU's ledger high-water mark the count was taken at.
	LedgerMark int64 `json:"ledger_mark"`
	// OpenWithoutHash counts open entries whose hash is gone: their units
	// stay reserved; a person decides about them.
	OpenWithoutHash int `json:"open_without_hash"`
}

// RecountRedis calibrates every bucket of a SKU from the authorities
// (design.md#runbook: never one INCR per missing key): committed from
// PostgreSQL's ledger, open from the reservations Redis still holds, the
// rest available. It refuses while a projection or a release is pending
// (a unit would count twice) and retries a bucket when PostgreSQL moved
// during the count.
func (s *Steps) RecountRedis(slots []redisstore.Slot) Step {
	return func(ctx context.Context) (any, string, error) {
		const via = "recount.lua"
		var out []BucketRecount
		for _, sl := range slots {
			b, err := s.recountBucket(ctx, sl)
			if err != nil {
				return out, via, err
			}
			out = append(out, b)
		}
		return map[string]any{"buckets": out}, via, nil
	}
}

func (s *Steps) recountBucket(ctx context.Context, sl redisstore.Slot) (BucketRecount, error) {
	b := BucketRecount{Bucket: sl.Tag()}
	for attempt := 0; attempt < recountAttempts; attempt++ {
		committed, mark, err := s.committed(ctx, sl)
		if err != nil {
			return b, err
		}
		ghosts, err := s.pending(ctx, sl)
		if err != nil {
			return b, err
		}
		res, err := s.Redis.Recount(ctx, sl, committed, time.Now())
		if err != nil {
			return b, err
		}
		_, after, err := s.committed(ctx, sl)
		if err != nil {
			return b, err
		}
		b.Result, b.Before, b.After, b.PostgresCommitted, b.LedgerMark, b.OpenWithoutHash =
			res.Reason, res.Before, res.After, committed, mark, ghosts
		if !res.OK() {
			return b, fmt.Errorf("%w: %s answered %s (initial %d, open %d, PostgreSQL committed %d)",
				ErrNotApplicable, sl.Tag(), res.Reason, res.Before.Initial, res.Before.OpenReserved, committed)
		}
		if after == mark {
			return b, nil
		}
		// An order was created or cancelled meanwhile: count again (the
		// counters are set, not added, so the next pass corrects this one).
	}
	return b, fmt.Errorf("%s: %w %d times; recount when the sale is quieter (pause it)", sl.Tag(), errPostgresMovedOn, recountAttempts)
}

func (s *Steps) committed(ctx context.Context, sl redisstore.Slot) (units, mark int64, err error) {
	if err := s.Pool.QueryRow(ctx, qRecountCommitted, sl.ActivityID, sl.SKUID, sl.Bucket).Scan(&units, &mark); err != nil {
		return 0, 0, fmt.Errorf("counting PostgreSQL's committed units of %s: %w", sl.Tag(), err)
	}
	return units, mark, nil
}

// pending refuses while Redis still holds open a reservation PostgreSQL
// gave an order, or shows a live order PostgreSQL cancelled; it returns how
// many open entries have no hash.
func (s *Steps) pending(ctx context.Context, sl redisstore.Slot) (int, error) {
	c := s.Redis.Client()
	members, err := c.ZRange(ctx, sl.Open(), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("reading the open set of %s: %w", sl.Tag(), err)
	}
	open := make([]uuid.UUID, 0, len(members))
	for _, m := range members {
		if id, err := uuid.Parse(m); err == nil {
			open = append(open, id)
		}
	}
	rows, err := s.Pool.Query(ctx, qRecountOpenDecided, open)
	if err != nil {
		return 0, fmt.Errorf("looking up %s's open reservations: %w", sl.Tag(), err)
	}
	decided, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return 0, fmt.Errorf("looking up %s's open reservations: %w", sl.Tag(), err)
	}
	if len(decided) > 0 {
		return 0, fmt.Errorf("%w: %d reservations of %s have an order in PostgreSQL but are open in Redis (e.g. %v): let the projector or the reconcile job's rebuild catch up",
			ErrPropagationPending, len(decided), sl.Tag(), decided[:min(len(decided), recountPendingSample)])
	}
	ghosts, err := s.statuses(ctx, sl, open, func(st states.HashStatus) bool { return st == "" })
	if err != nil {
		return 0, err
	}
	rows, err = s.Pool.Query(ctx, qRecountCancelled, sl.ActivityID, sl.SKUID, sl.Bucket)
	if err != nil {
		return 0, fmt.Errorf("listing %s's cancelled orders: %w", sl.Tag(), err)
	}
	cancelled, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return 0, fmt.Errorf("listing %s's cancelled orders: %w", sl.Tag(), err)
	}
	live, err := s.statuses(ctx, sl, cancelled, states.HashStatus.HasOrder)
	if err != nil {
		return 0, err
	}
	if live > 0 {
		return 0, fmt.Errorf("%w: %d cancelled orders of %s are still live in Redis: let the projector or the runbook's release-cancelled catch up",
			ErrPropagationPending, live, sl.Tag())
	}
	return ghosts, nil
}

// statuses counts the reservations whose Redis status matches (pipelined).
func (s *Steps) statuses(ctx context.Context, sl redisstore.Slot, ids []uuid.UUID, match func(states.HashStatus) bool) (int, error) {
	n := 0
	for start := 0; start < len(ids); start += 500 {
		page := ids[start:min(start+500, len(ids))]
		pipe := s.Redis.Client().Pipeline()
		cmds := make([]*redis.StringCmd, len(page))
		for i, id := range page {
			cmds[i] = pipe.HGet(ctx, sl.Reservation(id), "status")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("reading reservation statuses of %s: %w", sl.Tag(), err)
		}
		for _, c := range cmds {
			if match(states.HashStatus(c.Val())) {
				n++
			}
		}
	}
	return n, nil
}

// CloseByRecount closes a rejected reservation whose Redis key is gone
// (its compensation task gave up: design.md#compensation never adds one for a missing
// key) once an activity-level recount of its SKU, applied after the task
// gave up, has put the unit back: task VERIFIED (RECOUNTED), reservation
// COMPENSATED. Nothing touches stock here.
func (s *Steps) CloseByRecount(reservationID uuid.UUID) Step {
	return func(ctx context.Context) (any, string, error) {
		const via = "close_by_recount.sql"
		f, err := s.Facts(ctx, reservationID)
		if err != nil {
			return nil, via, err
		}
		if f.TaskID == nil || f.TaskStatus != states.TaskManual || (f.Status != states.ReservationOrderRejected && f.Status != states.ReservationCompensating) {
			return nil, via, fmt.Errorf("%w: reservation %s is %s with compensation task %q", ErrNotApplicable, reservationID, f.Status, f.TaskStatus)
		}
		h, err := s.Redis.Reservation(ctx, f.Slot, reservationID)
		if err != nil {
			return nil, via, err
		}
		if h != nil {
			return nil, via, fmt.Errorf("%w: Redis still holds reservation %s (%s): compensate it instead", ErrNotApplicable, reservationID, h.Status())
		}
		if _, err := s.Redis.Client().ZScore(ctx, f.Slot.Open(), reservationID.String()).Result(); err == nil {
			return nil, via, fmt.Errorf("%w: reservation %s is still in %s's open set", ErrNotApplicable, reservationID, f.Slot.Tag())
		} else if !errors.Is(err, redis.Nil) {
			return nil, via, fmt.Errorf("reading %s's open set: %w", f.Slot.Tag(), err)
		}
		var ok bool
		if err := s.Pool.QueryRow(ctx, qRecountApplied, f.Slot.ActivityID, SKUObject(f.Slot.SKUID), *f.TaskID).Scan(&ok); err != nil {
			return nil, via, fmt.Errorf("looking up the recounts of SKU %d: %w", f.Slot.SKUID, err)
		}
		if !ok {
			return nil, via, fmt.Errorf("%w: no recount of SKU %d was applied since compensation task %s gave up (seckill runbook resolve -step recount first)",
				ErrNotApplicable, f.Slot.SKUID, f.TaskID)
		}
		rows, err := s.Pool.Query(ctx, qCloseByRecount, reservationID, *f.TaskID)
		if err != nil {
			return nil, via, fmt.Errorf("closing reservation %s: %w", reservationID, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return nil, via, fmt.Errorf("closing reservation %s: %w", reservationID, err)
		}
		if len(got) == 0 {
			return nil, via, fmt.Errorf("%w: reservation %s changed meanwhile", ErrNotApplicable, reservationID)
		}
		return map[string]any{"reservation_status": string(states.ReservationCompensated), "compensation_task": string(states.TaskVerified), "last_result": "RECOUNTED"}, via, nil
	}
}
