// Package reconcile is the reconcile job of design.md#reconcile, the safety net
// under the real-time pipeline. One run of an activity, under a watermark
// (only what last changed before it is judged):
//
//  1. each reservation PostgreSQL holds is compared with its Redis
//     projection and compensation task (the design.md#reconcile switch, decide.go);
//  2. each reservation Redis holds open that PostgreSQL never heard of is
//     left while its message is in flight and rejected for the deadline
//     once its hard deadline passed;
//  3. the outbox (expired SENDING leases, MANUAL events) and payments of
//     cancelled orders are checked;
//  4. then the conservation pass: PostgreSQL's and each Redis slot's
//     internal invariants and the cross-system comparison (design.md#invariants).
//
// Findings design.md#auto-repair marks automatic are repaired through the
// standard state machine steps under an idempotent repair task
// (repair_id = SHA-256 of rule, reservation, version, target); everything
// else becomes a MANUAL repair task with its evidence, and a conflict that
// design.md#auto-repair says to freeze is frozen. The run and its anomalies are recorded; at
// most one run per activity works at a time, and even two runs would never
// apply one repair twice (the repair task's lease).
package reconcile

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/repair"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qRunAbandon          = sqlfile.Must(sqlFiles, "run_abandon")
	qRunStart            = sqlfile.Must(sqlFiles, "run_start")
	qRunFinish           = sqlfile.Must(sqlFiles, "run_finish")
	qAnomalyInsert       = sqlfile.Must(sqlFiles, "anomaly_insert")
	qReservationsScan    = sqlfile.Must(sqlFiles, "reservations_scan")
	qReleaseInFlight     = sqlfile.Must(sqlFiles, "release_in_flight")
	qReservationsKnown   = sqlfile.Must(sqlFiles, "reservations_known")
	qOutboxStale         = sqlfile.Must(sqlFiles, "outbox_stale")
	qPaymentsAfterCancel = sqlfile.Must(sqlFiles, "payments_after_cancel")
	qLedgerMark          = sqlfile.Must(sqlFiles, "ledger_mark")
)

// Anomaly types of the conservation pass (design.md#metrics reconcile_anomaly_total{type});
// the per-reservation ones are the rules of decide.go.
const (
	PGInvariant    = "PG_INTERNAL_INVARIANT_BROKEN"
	RedisInvariant = "REDIS_INTERNAL_INVARIANT_BROKEN"
	CrossSystem    = "CROSS_SYSTEM_DELTA"
	NotProvisioned = "NOT_PROVISIONED"
	// StockInTransit: units taken out of one bucket and not added to
	// another (a stock move whose mover crashed), left after this run
	// settled every pending move it could.
	StockInTransit = "REDIS_STOCK_IN_TRANSIT"
)

// Severities.
const (
	Info     = "INFO"
	Warning  = "WARNING"
	Critical = "CRITICAL"
)

// ErrRunInProgress: another run of this activity is working.
var ErrRunInProgress = errors.New("another reconcile run of this activity is in progress")

// RepairRef names the repair task an anomaly led to and what became of it
// in this run (repair.Outcome*, or MANUAL).
type RepairRef struct {
	ID      string `json:"repair_id"`
	Rule    string `json:"rule"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// Anomaly is one finding.
type Anomaly struct {
	Type     string         `json:"type"`
	Severity string         `json:"severity"`
	SKU      int64          `json:"sku_id"`
	Object   string         `json:"object,omitempty"`
	Delta    int64          `json:"delta"`
	Evidence map[string]any `json:"evidence"`
	Repair   *RepairRef     `json:"repair,omitempty"`
}

// Repaired: this run (or an earlier one) applied the anomaly's repair.
func (a Anomaly) Repaired() bool {
	return a.Repair != nil && a.Repair.Outcome == repair.OutcomeApplied
}

// Report is one run.
type Report struct {
	RunID     string    `json:"run_id"`
	Activity  int64     `json:"activity_id"`
	Watermark time.Time `json:"watermark"`
	Status    string    `json:"status"`
	Checked   int       `json:"reservations_checked"`
	InFlight  int       `json:"open_in_flight"`
	Anomalies []Anomaly `json:"anomalies"`
	// Purged is what the retention deleted after the run (nil: not run).
	Purged *Purged `json:"purged,omitempty"`
}

// Critical counts the critical anomalies left unrepaired.
func (r Report) Critical() int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Severity == Critical && !a.Repaired() {
			n++
		}
	}
	return n
}

// AutoRepaired counts the repairs this run applied.
func (r Report) AutoRepaired() int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Repaired() {
			n++
		}
	}
	return n
}

// Manual counts the anomalies left for a person.
func (r Report) Manual() int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Repair != nil && a.Repair.Outcome == repair.Manual {
			n++
		}
	}
	return n
}

// Job checks one activity.
type Job struct {
	Pool  *pgxpool.Pool
	Redis *redisstore.Store
	// HardDeadlineGrace is how long past its business deadline a reservation
	// PostgreSQL never heard of waits before the deadline rejection (default 1 min).
	HardDeadlineGrace time.Duration
	// TerminalTTL is the retention of a compensated reservation (default 24 h).
	TerminalTTL time.Duration
	// MaxCompensationAttempts caps the compensation task's attempts (default 10).
	MaxCompensationAttempts int
	// EventsTopic is where the rejection's outbox event goes (default names.TopicOrderEvents).
	EventsTopic string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// StillFor is how long a cross-system difference with nothing open must
	// stay put, both stores unmoved, before it needs a person (default 3 s):
	// an order cancelled in PostgreSQL whose release the projector has not
	// applied yet, or a store read between two steps of a moving sale,
	// differs for a moment without anything being lost.
	StillFor time.Duration

	// betweenReads, in tests, runs after a page is read from PostgreSQL
	// and before its Redis hashes are (a sale moving under the run).
	betweenReads func()
}

func (j *Job) stillFor() time.Duration {
	if j.StillFor > 0 {
		return j.StillFor
	}
	return 3 * time.Second
}

func (j *Job) hardDeadlineGrace() time.Duration {
	if j.HardDeadlineGrace > 0 {
		return j.HardDeadlineGrace
	}
	return time.Minute
}

// pass is one run in progress.
type pass struct {
	job     *Job
	rep     *Report
	runID   uuid.UUID
	repairs *repair.Store
	steps   *repair.Steps
	paused  bool
}

func (run *pass) now() time.Time {
	if run.job.Now != nil {
		return run.job.Now()
	}
	return time.Now()
}

func (run *pass) add(a Anomaly) { run.rep.Anomalies = append(run.rep.Anomalies, a) }

// auto applies an automatic repair once (across every run) and records the finding.
func (run *pass) auto(ctx context.Context, a Anomaly, t *repair.Task, step repair.Step) error {
	outcome, err := run.repairs.Apply(ctx, t, step)
	a.Repair = repairRef(t, outcome)
	switch outcome {
	case repair.OutcomeFailed:
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		a.Repair.Error = err.Error() // kept PENDING: the next run tries again
		a.Severity = Critical
	case repair.OutcomeAlreadyApplied:
		// The same repair (same object version) was applied before and the
		// finding is back: applying it again is not allowed; a person decides.
		a.Type, a.Severity = RuleRepairDidNotHold, Critical
		m := repair.New(run.rep.Activity, t.ObjectType, t.ObjectID, RuleRepairDidNotHold, t.Version, t.Rule)
		m.Evidence, m.RunID, m.Operator, m.Reason = a.Evidence, &run.runID, "reconcile", "repair "+t.IDHex+" was applied and the finding is back"
		m.Evidence["earlier_repair"] = t.IDHex
		if err := run.manual(ctx, &a, &m); err != nil {
			return err
		}
	case repair.OutcomeClosed:
		a.Severity = Critical // a person closed it and the finding stands
	}
	run.add(a)
	return nil
}

// manual records a MANUAL repair task for a finding (once across runs).
func (run *pass) manual(ctx context.Context, a *Anomaly, t *repair.Task) error {
	if _, err := run.repairs.Manual(ctx, t); err != nil {
		return err
	}
	cur, err := run.repairs.Get(ctx, t.ID)
	if err != nil {
		return err
	}
	outcome := repair.Manual
	if cur.Status == repair.Rejected {
		outcome = repair.Rejected // reviewed: no action was the decision
	}
	a.Repair = repairRef(t, outcome)
	return nil
}

// Run checks every SKU, repairs what is allowed, records the run and its
// anomalies, and returns the report. Two runs at once: the second returns
// ErrRunInProgress.
func (j *Job) Run(ctx context.Context, activity int64, skus []control.SKU, watermark time.Time) (Report, error) {
	runID := ids.NewRandom()
	rep := Report{RunID: runID.String(), Activity: activity, Watermark: watermark, Anomalies: []Anomaly{}}
	if _, err := j.Pool.Exec(ctx, qRunAbandon, activity, "30 minutes"); err != nil {
		return rep, fmt.Errorf("closing abandoned reconcile runs: %w", err)
	}
	if _, err := j.Pool.Exec(ctx, qRunStart, rep.RunID, activity, watermark); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return rep, ErrRunInProgress
		}
		return rep, fmt.Errorf("starting the reconcile run: %w", err)
	}
	run := &pass{job: j, rep: &rep, runID: runID, repairs: &repair.Store{Pool: j.Pool},
		steps: &repair.Steps{Pool: j.Pool, Redis: j.Redis, Owner: "reconcile:" + runID.String(),
			TerminalTTL: j.TerminalTTL, MaxAttempts: j.MaxCompensationAttempts}}
	checkErr := run.check(ctx, skus)
	rep.Status = "CLEAN"
	switch {
	case checkErr != nil:
		rep.Status = "FAILED"
	case rep.Critical() > 0 || rep.Manual() > 0:
		rep.Status = "ANOMALIES"
	case rep.AutoRepaired() > 0:
		rep.Status = "REPAIRED"
	case len(rep.Anomalies) > 0:
		rep.Status = "ANOMALIES"
	}
	if err := j.record(context.WithoutCancel(ctx), &rep, checkErr); err != nil {
		return rep, err
	}
	return rep, checkErr
}

func (run *pass) check(ctx context.Context, skus []control.SKU) error {
	store := &control.Store{Pool: run.job.Pool, Redis: run.job.Redis}
	paused, err := store.CompensationPaused(ctx, run.rep.Activity)
	if err != nil {
		return err
	}
	run.paused = paused
	for _, sku := range skus {
		if err := run.checkReservations(ctx, sku); err != nil {
			return err
		}
		if err := run.checkOpen(ctx, sku); err != nil {
			return err
		}
	}
	if err := run.checkOutbox(ctx); err != nil {
		return err
	}
	if err := run.checkPayments(ctx); err != nil {
		return err
	}
	// After the repairs: design.md#reconcile verify_cross_system_counters.
	return run.conservation(ctx, store, skus)
}

func (run *pass) conservation(ctx context.Context, store *control.Store, skus []control.SKU) error {
	activity := run.rep.Activity
	for _, sku := range skus {
		c, err := store.Inventory(ctx, activity, sku.ID)
		if err != nil {
			return err
		}
		if !c.Provisioned {
			run.add(Anomaly{Type: NotProvisioned, Severity: Critical, SKU: sku.ID,
				Evidence: map[string]any{"postgres": "no sku_inventory row"}})
			continue
		}
		if d := c.Initial - c.Available - c.Occupied - c.Sold; d != 0 {
			run.add(Anomaly{Type: PGInvariant, Severity: Critical, SKU: sku.ID, Delta: d,
				Evidence: map[string]any{"initial": c.Initial, "available": c.Available, "occupied": c.Occupied, "sold": c.Sold}})
		}
		// A gateway that crashed in the middle of a stock move left its
		// units in transit: finish those moves first (each once, by id).
		var settleErr error
		if _, err := store.Redis.Settle(ctx, sku.Slots(activity), 10*time.Second, time.Now()); err != nil {
			settleErr = err
		}
		var committed, open, inTransit int64
		for _, sl := range sku.Slots(activity) {
			rc, err := store.Redis.ReadCounters(ctx, sl)
			if err != nil {
				return err
			}
			committed += rc.Committed
			open += rc.OpenReserved
			inTransit += rc.InTransit()
			if !rc.Exists {
				run.add(Anomaly{Type: NotProvisioned, Severity: Critical, SKU: sku.ID, Object: sl.Tag(),
					Evidence: map[string]any{"redis": "no counters"}})
				continue
			}
			if d := rc.Delta(); d != 0 {
				run.add(Anomaly{Type: RedisInvariant, Severity: Critical, SKU: sku.ID, Object: sl.Tag(), Delta: d,
					Evidence: map[string]any{"initial": rc.Initial, "moved_in": rc.MovedIn, "moved_out": rc.MovedOut,
						"available": rc.Available, "open_reserved": rc.OpenReserved, "committed": rc.Committed}})
			}
		}
		if inTransit != 0 || settleErr != nil {
			// A move younger than the settle bound is most likely being
			// made now; one that cannot be settled needs a person.
			sev, ev := Info, map[string]any{"units_in_transit": inTransit}
			if settleErr != nil {
				sev, ev["settle_error"] = Critical, settleErr.Error()
			}
			run.add(Anomaly{Type: StockInTransit, Severity: sev, SKU: sku.ID, Delta: inTransit, Evidence: ev})
		}
		// Redis committed = PostgreSQL occupied + sold once nothing is in
		// flight; with open reservations the projection may simply lag, and
		// a difference that moves (a cancel's release on its way to Redis)
		// is in flight too: only one that stays put needs a person.
		if d := c.Occupied + c.Sold - committed; d != 0 {
			sev := Critical
			moving := false
			if open > 0 {
				sev = Info
			} else {
				var err error
				if moving, err = run.moving(ctx, store, sku, c.Occupied+c.Sold, committed); err != nil {
					return err
				}
				if moving {
					sev = Info
				}
			}
			a := Anomaly{Type: CrossSystem, Severity: sev, SKU: sku.ID, Delta: d,
				Evidence: map[string]any{"postgres_occupied_plus_sold": c.Occupied + c.Sold, "redis_committed": committed,
					"redis_open_reserved": open, "moving": moving}}
			if sev == Critical {
				// Nothing in flight explains it (Redis lost writes, a key
				// was deleted): design.md#runbook's activity-level recount, by a
				// person — never one INCR per missing key.
				var mark int64
				if err := run.job.Pool.QueryRow(ctx, qLedgerMark, activity, sku.ID).Scan(&mark); err != nil {
					return fmt.Errorf("reading the ledger mark of SKU %d: %w", sku.ID, err)
				}
				t := repair.New(activity, repair.ObjectSKU, repair.SKUObject(sku.ID), repair.RuleRecount, mark, "REDIS_RECOUNTED")
				t.Evidence, t.RunID, t.Operator, t.Reason = a.Evidence, &run.runID, "reconcile",
					"Redis committed differs from PostgreSQL occupied + sold with nothing in flight: activity-level recount (seckill runbook resolve -step recount)"
				if err := run.manual(ctx, &a, &t); err != nil {
					return err
				}
			}
			run.add(a)
		}
	}
	return nil
}

// moving reads both stores again after StillFor: true when PostgreSQL's
// occupied + sold, Redis's committed or its open reservations changed — the
// difference seen is a sale in motion, not a loss.
func (run *pass) moving(ctx context.Context, store *control.Store, sku control.SKU, pgCommitted, redisCommitted int64) (bool, error) {
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(run.job.stillFor()):
	}
	c, err := store.Inventory(ctx, run.rep.Activity, sku.ID)
	if err != nil {
		return false, err
	}
	var committed, open int64
	for _, sl := range sku.Slots(run.rep.Activity) {
		rc, err := store.Redis.ReadCounters(ctx, sl)
		if err != nil {
			return false, err
		}
		committed += rc.Committed
		open += rc.OpenReserved
	}
	return c.Occupied+c.Sold != pgCommitted || committed != redisCommitted || open != 0, nil
}

func (j *Job) record(ctx context.Context, rep *Report, checkErr error) error {
	return pgx.BeginTxFunc(ctx, j.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, a := range rep.Anomalies {
			ev, err := json.Marshal(a.Evidence)
			if err != nil {
				return fmt.Errorf("encoding the evidence of anomaly %s: %w", a.Type, err)
			}
			var repairID []byte
			if a.Repair != nil {
				if repairID, err = repair.ParseID(a.Repair.ID); err != nil {
					return fmt.Errorf("anomaly %s: %w", a.Type, err)
				}
			}
			if _, err := tx.Exec(ctx, qAnomalyInsert, rep.RunID, a.Type, a.Severity, rep.Activity, a.SKU, a.Object, a.Delta, ev, repairID); err != nil {
				return fmt.Errorf("recording anomaly %s: %w", a.Type, err)
			}
		}
		summary := map[string]any{"critical": rep.Critical(), "anomalies": len(rep.Anomalies),
			"reservations_checked": rep.Checked, "open_in_flight": rep.InFlight}
		if checkErr != nil {
			summary["error"] = checkErr.Error()
		}
		sj, err := json.Marshal(summary)
		if err != nil {
			return fmt.Errorf("encoding the reconcile run's summary: %w", err)
		}
		if _, err := tx.Exec(ctx, qRunFinish, rep.RunID, rep.Status, len(rep.Anomalies), rep.AutoRepaired(), rep.Manual(), sj); err != nil {
			return fmt.Errorf("finishing the reconcile run: %w", err)
		}
		return nil
	})
}

// Print writes the report for a person.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "reconcile run %s of activity %d (watermark %s): %s\n", r.RunID, r.Activity, r.Watermark.Format(time.RFC3339), r.Status)
	fmt.Fprintf(w, "  %d reservations checked, %d open ones still in flight\n", r.Checked, r.InFlight)
	if len(r.Anomalies) == 0 {
		fmt.Fprintln(w, "  no anomalies: PostgreSQL and Redis conserve stock and agree")
	}
	for _, a := range r.Anomalies {
		fmt.Fprintf(w, "  %-8s %-32s sku %d %s", a.Severity, a.Type, a.SKU, a.Object)
		if a.Delta != 0 {
			fmt.Fprintf(w, " delta %d", a.Delta)
		}
		if a.Repair != nil {
			fmt.Fprintf(w, "  → %s (repair %s)", a.Repair.Outcome, a.Repair.ID[:16])
			if a.Repair.Error != "" {
				fmt.Fprintf(w, ": %s", a.Repair.Error)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  %d repaired automatically, %d left for manual review (seckill runbook list), %d critical unrepaired\n",
		r.AutoRepaired(), r.Manual(), r.Critical())
	if r.Purged != nil {
		fmt.Fprintf(w, "  retention: %d sent outbox events and %d finished inbox rows deleted\n", r.Purged.Outbox, r.Purged.Inbox)
	}
}
