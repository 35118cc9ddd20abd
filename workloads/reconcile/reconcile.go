// Package reconcile is the reconcile job's stock conservation pass (seed
// §13.4, the first half of §13.5): PostgreSQL's and each Redis slot's
// internal invariants, and the cross-system comparison of what PostgreSQL
// holds as sold with what Redis counts as committed. A run is recorded with
// its anomalies and evidence; at most one runs per activity at a time.
package reconcile

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	qRunAbandon    = sqlfile.Must(sqlFiles, "run_abandon")
	qRunStart      = sqlfile.Must(sqlFiles, "run_start")
	qRunFinish     = sqlfile.Must(sqlFiles, "run_finish")
	qAnomalyInsert = sqlfile.Must(sqlFiles, "anomaly_insert")
)

// Anomaly types (seed §12.2 reconcile_anomaly_total{type}).
const (
	PGInvariant    = "PG_INTERNAL_INVARIANT_BROKEN"
	RedisInvariant = "REDIS_INTERNAL_INVARIANT_BROKEN"
	CrossSystem    = "CROSS_SYSTEM_DELTA"
	NotProvisioned = "NOT_PROVISIONED"
)

// Severities.
const (
	Info     = "INFO"
	Warning  = "WARNING"
	Critical = "CRITICAL"
)

// ErrRunInProgress: another run of this activity is working.
var ErrRunInProgress = errors.New("another reconcile run of this activity is in progress")

// Anomaly is one finding.
type Anomaly struct {
	Type     string         `json:"type"`
	Severity string         `json:"severity"`
	SKU      int64          `json:"sku_id"`
	Object   string         `json:"object,omitempty"`
	Delta    int64          `json:"delta"`
	Evidence map[string]any `json:"evidence"`
}

// Report is one run.
type Report struct {
	RunID     string    `json:"run_id"`
	Activity  int64     `json:"activity_id"`
	Watermark time.Time `json:"watermark"`
	Status    string    `json:"status"`
	Anomalies []Anomaly `json:"anomalies"`
}

// Critical counts the critical anomalies.
func (r Report) Critical() int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Severity == Critical {
			n++
		}
	}
	return n
}

// Job checks one activity.
type Job struct {
	Pool  *pgxpool.Pool
	Redis *redisstore.Store
}

// Run checks every SKU, records the run and its anomalies, and returns the
// report. Two runs at once: the second returns ErrRunInProgress.
func (j *Job) Run(ctx context.Context, activity int64, skus []control.SKU, watermark time.Time) (Report, error) {
	rep := Report{RunID: ids.NewRandom().String(), Activity: activity, Watermark: watermark, Anomalies: []Anomaly{}}
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
	store := &control.Store{Pool: j.Pool, Redis: j.Redis}
	checkErr := j.check(ctx, store, activity, skus, &rep)
	rep.Status = "CLEAN"
	switch {
	case checkErr != nil:
		rep.Status = "FAILED"
	case len(rep.Anomalies) > 0:
		rep.Status = "ANOMALIES"
	}
	if err := j.record(ctx, &rep, checkErr); err != nil {
		return rep, err
	}
	return rep, checkErr
}

func (j *Job) check(ctx context.Context, store *control.Store, activity int64, skus []control.SKU, rep *Report) error {
	for _, sku := range skus {
		c, err := store.Inventory(ctx, activity, sku.ID)
		if err != nil {
			return err
		}
		if !c.Provisioned {
			rep.Anomalies = append(rep.Anomalies, Anomaly{Type: NotProvisioned, Severity: Critical, SKU: sku.ID,
				Evidence: map[string]any{"postgres": "no sku_inventory row"}})
			continue
		}
		if d := c.Initial - c.Available - c.Occupied - c.Sold; d != 0 {
			rep.Anomalies = append(rep.Anomalies, Anomaly{Type: PGInvariant, Severity: Critical, SKU: sku.ID, Delta: d,
				Evidence: map[string]any{"initial": c.Initial, "available": c.Available, "occupied": c.Occupied, "sold": c.Sold}})
		}
		var committed, open int64
		for _, sl := range sku.Slots(activity) {
			rc, err := store.Redis.ReadCounters(ctx, sl)
			if err != nil {
				return err
			}
			committed += rc.Committed
			open += rc.OpenReserved
			if !rc.Exists {
				rep.Anomalies = append(rep.Anomalies, Anomaly{Type: NotProvisioned, Severity: Critical, SKU: sku.ID, Object: sl.Tag(),
					Evidence: map[string]any{"redis": "no counters"}})
				continue
			}
			if d := rc.Delta(); d != 0 {
				rep.Anomalies = append(rep.Anomalies, Anomaly{Type: RedisInvariant, Severity: Critical, SKU: sku.ID, Object: sl.Tag(), Delta: d,
					Evidence: map[string]any{"initial": rc.Initial, "available": rc.Available, "open_reserved": rc.OpenReserved, "committed": rc.Committed}})
			}
		}
		// Redis committed = PostgreSQL occupied + sold once nothing is in
		// flight; with open reservations the projection may simply lag.
		if d := c.Occupied + c.Sold - committed; d != 0 {
			sev := Critical
			if open > 0 {
				sev = Info
			}
			rep.Anomalies = append(rep.Anomalies, Anomaly{Type: CrossSystem, Severity: sev, SKU: sku.ID, Delta: d,
				Evidence: map[string]any{"postgres_occupied_plus_sold": c.Occupied + c.Sold, "redis_committed": committed, "redis_open_reserved": open}})
		}
	}
	return nil
}

func (j *Job) record(ctx context.Context, rep *Report, checkErr error) error {
	return pgx.BeginTxFunc(ctx, j.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, a := range rep.Anomalies {
			ev, _ := json.Marshal(a.Evidence)
			if _, err := tx.Exec(ctx, qAnomalyInsert, rep.RunID, a.Type, a.Severity, rep.Activity, a.SKU, a.Object, a.Delta, ev); err != nil {
				return fmt.Errorf("recording anomaly %s: %w", a.Type, err)
			}
		}
		summary := map[string]any{"critical": rep.Critical(), "anomalies": len(rep.Anomalies)}
		if checkErr != nil {
			summary["error"] = checkErr.Error()
		}
		sj, _ := json.Marshal(summary)
		if _, err := tx.Exec(ctx, qRunFinish, rep.RunID, rep.Status, len(rep.Anomalies), 0, rep.Critical(), sj); err != nil {
			return fmt.Errorf("finishing the reconcile run: %w", err)
		}
		return nil
	})
}

// Print writes the report for a person.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "reconcile run %s of activity %d (watermark %s): %s\n", r.RunID, r.Activity, r.Watermark.Format(time.RFC3339), r.Status)
	if len(r.Anomalies) == 0 {
		fmt.Fprintln(w, "  no anomalies: PostgreSQL and Redis conserve stock and agree")
	}
	for _, a := range r.Anomalies {
		ev, _ := json.Marshal(a.Evidence)
		fmt.Fprintf(w, "  %-8s %-32s sku %d %s delta %d %s\n", a.Severity, a.Type, a.SKU, a.Object, a.Delta, ev)
	}
	fmt.Fprintf(w, "  %d critical (left for manual review: automatic repairs are not part of this pass)\n", r.Critical())
}
