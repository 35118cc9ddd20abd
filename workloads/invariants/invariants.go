// Package invariants is the one judge of a sale: it reads PostgreSQL and
// Redis straight and says, check by check, whether the promises of
// design.md#invariants hold for an activity — no oversell, one valid order per
// user and SKU, one order per reservation, every accepted reservation
// terminal within a bound, stock conserved in PostgreSQL (per SKU) and in
// Redis (per bucket, moves included), Redis committed = PostgreSQL occupied
// + sold, the ledger balanced against the stock columns, no orphan outbox
// event, compensation or repair task, every quarantined message accounted
// for.
//
// Every test that ends a sale, the demos, bench-sale, the cluster sale, the
// chaos suite and `seckill runbook verify` call Run. A query that fails
// fails the check: Run returns the error, never a zero read as "clean".
package invariants

import (
	"context"
	"embed"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qSKUState = sqlfile.Must(sqlFiles, "sku_state")
	qOrders   = sqlfile.Must(sqlFiles, "orders")
	qPending  = sqlfile.Must(sqlFiles, "pending")
)

// MaxBuckets is the most stock buckets a SKU can have (the reservation
// table's bucket check).
const MaxBuckets = 64

// SKU names a SKU and its Redis stock buckets (0 or 1: unbucketed).
type SKU struct {
	ID      int64
	Buckets int
}

// Expect is what the caller knows of the sale's moment.
type Expect struct {
	// Settled: the sale is over and has converged — nothing may be in
	// flight: every reservation terminal, nothing open or in transit in
	// Redis, every outbox event sent, every compensation and repair done,
	// and Redis committed = PostgreSQL occupied + sold exactly.
	Settled bool
	// Within bounds the steps while the sale runs (not Settled): a
	// reservation, outbox event, compensation or repair task older than
	// this and not finished is a violation. 0: 2 minutes.
	Within time.Duration
	// Quarantined is how many of the activity's messages the caller put in
	// quarantine on purpose (malformed, conflicting); any other count is a
	// violation.
	Quarantined int64
	// ManualReview is how many reservations the caller expects frozen in
	// MANUAL_REVIEW (a conflict it injected).
	ManualReview int64
	// NoRedis: the caller's sale never touched Redis (a consumer bench that
	// sends its messages itself); the Redis checks are left out, and the
	// report says so.
	NoRedis bool
}

// Check is one invariant's verdict.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	Got  string `json:"got"`
}

// Report is every check of one Run.
type Report struct {
	Activity int64   `json:"activity"`
	Checks   []Check `json:"checks"`
}

// Add appends a check (callers add their scenario's own expectations, e.g.
// "every unit sold", beside the invariants).
func (r *Report) Add(name string, ok bool, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Got: fmt.Sprintf(format, args...)})
}

// OK tells whether every check held.
func (r Report) OK() bool { return len(r.Failed()) == 0 }

// Failed lists the checks that did not hold, as "name: got".
func (r Report) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Name+": "+c.Got)
		}
	}
	return out
}

// String is the report as a table, one check per line.
func (r Report) String() string {
	var b strings.Builder
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "%s %-58s %s\n", mark, c.Name, c.Got)
	}
	return b.String()
}

// Sources are where the checks read.
type Sources struct {
	Pool  *pgxpool.Pool
	Redis *redisstore.Store
}

// Run checks activity's invariants. skus nil: every SKU the activity has in
// sku_inventory, its Redis buckets found by reading every possible bucket
// slot. A failed query or Redis read returns the error (and no report).
func Run(ctx context.Context, src Sources, activity int64, skus []SKU, exp Expect) (Report, error) {
	r := Report{Activity: activity}
	if src.Pool == nil || (src.Redis == nil && !exp.NoRedis) {
		return r, fmt.Errorf("invariants of activity %d: PostgreSQL and Redis are both needed", activity)
	}
	pg, err := readSKUs(ctx, src.Pool, activity)
	if err != nil {
		return r, err
	}
	if skus == nil {
		for _, s := range pg {
			skus = append(skus, SKU{ID: s.sku})
		}
	}
	var redis map[int64]redisSKU
	if !exp.NoRedis {
		if redis, err = readRedis(ctx, src.Redis, activity, skus); err != nil {
			return r, err
		}
	}
	r.Add("the activity is provisioned in PostgreSQL", len(pg) > 0, "%d SKUs", len(pg))
	checkSKUs(&r, pg, redis, exp)
	if err := checkOrders(ctx, src.Pool, activity, &r); err != nil {
		return r, err
	}
	if err := checkPending(ctx, src.Pool, activity, exp, &r); err != nil {
		return r, err
	}
	return r, nil
}

// pgSKU is one row of sku_state.sql.
type pgSKU struct {
	sku                                 int64
	initial, available, occupied, sold  int64
	ledgerOccupied, ledgerSold          int64
	openOrders, paidOrders, validOrders int64
}

func readSKUs(ctx context.Context, pool *pgxpool.Pool, activity int64) ([]pgSKU, error) {
	rows, err := pool.Query(ctx, qSKUState, activity)
	if err != nil {
		return nil, fmt.Errorf("reading the stock of activity %d: %w", activity, err)
	}
	defer rows.Close()
	var out []pgSKU
	for rows.Next() {
		var s pgSKU
		if err := rows.Scan(&s.sku, &s.initial, &s.available, &s.occupied, &s.sold,
			&s.ledgerOccupied, &s.ledgerSold, &s.openOrders, &s.paidOrders, &s.validOrders); err != nil {
			return nil, fmt.Errorf("reading the stock of activity %d: %w", activity, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the stock of activity %d: %w", activity, err)
	}
	return out, nil
}

// redisSKU is a SKU's buckets as Redis holds them.
type redisSKU struct {
	sku     int64
	buckets []redisstore.Counters
	slots   []redisstore.Slot
}

func (s redisSKU) total() redisstore.Counters {
	var t redisstore.Counters
	for _, c := range s.buckets {
		t = t.Add(c)
	}
	return t
}

// readRedis reads each SKU's bucket counters; a SKU of unknown buckets has
// every possible slot read and keeps those that exist.
func readRedis(ctx context.Context, rs *redisstore.Store, activity int64, skus []SKU) (map[int64]redisSKU, error) {
	out := make(map[int64]redisSKU, len(skus))
	for _, s := range skus {
		slots := redisstore.Slots(activity, s.ID, s.Buckets)
		probe := s.Buckets == 0
		if probe {
			slots = append([]redisstore.Slot{redisstore.SKUSlot(activity, s.ID)}, redisstore.Slots(activity, s.ID, MaxBuckets)...)
		}
		cs, err := rs.ReadCountersOf(ctx, slots)
		if err != nil {
			return nil, fmt.Errorf("reading the Redis counters of SKU %d of activity %d: %w", s.ID, activity, err)
		}
		rsku := redisSKU{sku: s.ID}
		for i, c := range cs {
			if probe && !c.Exists {
				continue
			}
			rsku.buckets = append(rsku.buckets, c)
			rsku.slots = append(rsku.slots, slots[i])
		}
		out[s.ID] = rsku
	}
	return out, nil
}

func checkSKUs(r *Report, pg []pgSKU, redis map[int64]redisSKU, exp Expect) {
	for _, s := range pg {
		p := fmt.Sprintf("SKU %d: ", s.sku)
		r.Add(p+"no oversell (valid orders <= initial stock)", s.validOrders <= s.initial,
			"%d valid orders, %d units", s.validOrders, s.initial)
		r.Add(p+"PostgreSQL initial = available + occupied + sold, none negative",
			s.initial == s.available+s.occupied+s.sold && s.available >= 0 && s.occupied >= 0 && s.sold >= 0,
			"%d = %d + %d + %d", s.initial, s.available, s.occupied, s.sold)
		r.Add(p+"ledger balanced against the stock columns", s.ledgerOccupied == s.occupied && s.ledgerSold == s.sold,
			"ledger occupied %d sold %d, columns %d %d", s.ledgerOccupied, s.ledgerSold, s.occupied, s.sold)
		r.Add(p+"orders agree with the stock (open = occupied, paid = sold)", s.openOrders == s.occupied && s.paidOrders == s.sold,
			"open %d paid %d, occupied %d sold %d", s.openOrders, s.paidOrders, s.occupied, s.sold)

		if exp.NoRedis {
			r.Add(p+"Redis not checked", true, "the caller's sale never touched Redis")
			continue
		}
		rs, ok := redis[s.sku]
		if !ok || len(rs.buckets) == 0 {
			r.Add(p+"provisioned in Redis", false, "no bucket counters")
			continue
		}
		var bad []string
		for i, c := range rs.buckets {
			if !c.Exists || c.Delta() != 0 || c.Available < 0 || c.OpenReserved < 0 || c.Committed < 0 {
				bad = append(bad, fmt.Sprintf("%s: exists %v, %d + %d - %d = %d + %d + %d", rs.slots[i].Tag(),
					c.Exists, c.Initial, c.MovedIn, c.MovedOut, c.Available, c.OpenReserved, c.Committed))
			}
		}
		r.Add(p+"Redis per bucket: initial + in - out = available + open + committed", len(bad) == 0,
			"%d buckets, %d broken %s", len(rs.buckets), len(bad), strings.Join(bad, "; "))
		t := rs.total()
		committedPG := s.occupied + s.sold
		if exp.Settled {
			r.Add(p+"Redis: nothing open, nothing in transit", t.OpenReserved == 0 && t.InTransit() == 0,
				"%d open, %d in transit", t.OpenReserved, t.InTransit())
			r.Add(p+"Redis committed = PostgreSQL occupied + sold", t.Committed == committedPG,
				"%d = %d", t.Committed, committedPG)
		} else {
			// While reservations are open the projection may lag, but
			// Redis never counts committed a unit PostgreSQL does not hold
			// beyond its open reservations.
			r.Add(p+"Redis committed <= PostgreSQL occupied + sold + Redis open", t.Committed <= committedPG+t.OpenReserved,
				"%d <= %d + %d", t.Committed, committedPG, t.OpenReserved)
		}
	}
}

func checkOrders(ctx context.Context, pool *pgxpool.Pool, activity int64, r *Report) error {
	var dupUsers, dupRes, orphanOrders, missingOrders, paidCancelled, compensatedOrders int64
	if err := pool.QueryRow(ctx, qOrders, activity).Scan(&dupUsers, &dupRes, &orphanOrders, &missingOrders,
		&paidCancelled, &compensatedOrders); err != nil {
		return fmt.Errorf("reading the orders of activity %d: %w", activity, err)
	}
	r.Add("one valid order per user and SKU", dupUsers == 0, "%d users with more", dupUsers)
	r.Add("one order per reservation", dupRes == 0, "%d reservations with more", dupRes)
	r.Add("every order's reservation is ORDER_CREATED with it (or frozen from it)", orphanOrders == 0, "%d orders without", orphanOrders)
	r.Add("every ORDER_CREATED reservation has its order", missingOrders == 0, "%d without", missingOrders)
	r.Add("no cancelled order keeps a successful payment", paidCancelled == 0, "%d", paidCancelled)
	r.Add("no reservation both ordered and compensated", compensatedOrders == 0, "%d", compensatedOrders)
	return nil
}

func checkPending(ctx context.Context, pool *pgxpool.Pool, activity int64, exp Expect, r *Report) error {
	cutoff := time.Now()
	bound := "now"
	if !exp.Settled {
		w := exp.Within
		if w <= 0 {
			w = 2 * time.Minute
		}
		cutoff, bound = cutoff.Add(-w), "older than "+w.String()
	}
	var open, manual, outbox, outboxManual, comp, compManual, repair, repairManual, quarantined int64
	if err := pool.QueryRow(ctx, qPending, activity, cutoff).Scan(&open, &manual, &outbox, &outboxManual,
		&comp, &compManual, &repair, &repairManual, &quarantined); err != nil {
		return fmt.Errorf("reading the open work of activity %d: %w", activity, err)
	}
	r.Add("every accepted reservation terminal ("+bound+")", open == 0, "%d not terminal", open)
	r.Add("reservations in MANUAL_REVIEW as expected", manual == exp.ManualReview, "%d, expected %d", manual, exp.ManualReview)
	r.Add("no orphan outbox event ("+bound+")", outbox == 0 && outboxManual == 0, "%d unsent, %d MANUAL", outbox, outboxManual)
	r.Add("no orphan compensation task ("+bound+")", comp == 0 && compManual == 0, "%d not applied, %d MANUAL", comp, compManual)
	r.Add("no orphan repair task ("+bound+")", repair == 0 && repairManual == 0, "%d PENDING, %d MANUAL", repair, repairManual)
	r.Add("every quarantined message accounted for", quarantined == exp.Quarantined, "%d, expected %d", quarantined, exp.Quarantined)
	return nil
}

// Await runs the checks until they all hold or timeout passes, and returns
// the last report: a sale converges after its last request (the projection,
// the relay, the compensations finish their work), so a caller judging a
// settled sale waits for it here rather than sleeping. A query error ends
// the wait with the error.
func Await(ctx context.Context, src Sources, activity int64, skus []SKU, exp Expect, timeout time.Duration) (Report, error) {
	deadline := time.Now().Add(timeout)
	for {
		r, err := Run(ctx, src, activity, skus, exp)
		if err != nil || r.OK() || !time.Now().Before(deadline) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("waiting for the invariants of activity %d: %w", activity, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
