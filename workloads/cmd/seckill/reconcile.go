package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/reconcile"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// runReconcile is the reconcile job: one run over the activity's SKUs
// (per-reservation checks and their repairs, then conservation), recorded,
// printed for a person or as JSON; exit status 1 when critical anomalies
// are left unrepaired.
func runReconcile(ctx context.Context, args []string) error {
	var c config.Common
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	c.Bind(fs)
	final := fs.Bool("final", false, "the run after the end: a run already in progress is an error (the Job retries)")
	lag := fs.Duration("watermark-lag", time.Minute, "check what is older than now minus this")
	grace := fs.Duration("hard-deadline-grace", time.Minute, "how long past its business deadline a reservation PostgreSQL never saw waits before the deadline rejection")
	jsonOut := fs.Bool("json", false, "print the report as JSON instead of text")
	outboxKeep := fs.Duration("outbox-retention", 7*24*time.Hour, "after the run, delete the activity's outbox events sent longer ago than this (0: keep them)")
	inboxKeep := fs.Duration("inbox-retention", 7*24*time.Hour, fmt.Sprintf("after the run, delete the activity's finished inbox rows older than this: 0 keeps them, otherwise at least %s (longer than the broker keeps a message)", reconcile.MinInboxRetention))
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if err := c.Check(config.Need{PG: true, Redis: true, Slots: true}); err != nil {
		return usageError{err}
	}
	if *lag < 0 {
		return usageError{errors.New("-watermark-lag must not be negative")}
	}
	if *grace <= 0 {
		return usageError{errors.New("-hard-deadline-grace must be positive")}
	}
	if *outboxKeep < 0 || *inboxKeep < 0 || (*inboxKeep > 0 && *inboxKeep < reconcile.MinInboxRetention) {
		return usageError{fmt.Errorf("-outbox-retention must not be negative; -inbox-retention must be 0 or at least %s", reconcile.MinInboxRetention)}
	}
	skus := controlSKUs(&c) // checked above (Need.Slots)
	var closers []func() error
	defer closeAll(&closers)
	pool, err := openPG(ctx, &c, &closers)
	if err != nil {
		return err
	}
	rdb, err := openRedis(ctx, &c, &closers)
	if err != nil {
		return err
	}
	job := &reconcile.Job{Pool: pool, Redis: redisstore.New(rdb), HardDeadlineGrace: *grace}
	rep, err := job.Run(ctx, c.ActivityID, skus, time.Now().Add(-*lag))
	if errors.Is(err, reconcile.ErrRunInProgress) && !*final {
		fmt.Println("another reconcile run of this activity is in progress; nothing done")
		return nil
	}
	if err != nil {
		return err
	}
	// Housekeeping after a run that was not refused: the tables a sale
	// scans stay the size of a sale.
	purged, err := job.Purge(ctx, c.ActivityID, reconcile.Retention{Outbox: *outboxKeep, Inbox: *inboxKeep}, time.Now())
	if err != nil {
		return err
	}
	rep.Purged = &purged
	logFindings(c.Logger("reconcile"), rep)
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.Print(os.Stdout)
	}
	if n := rep.Critical(); n > 0 {
		return fmt.Errorf("%d critical anomalies left for manual review (run %s)", n, rep.RunID)
	}
	return nil
}

// logFindings writes each anomaly, and the repair it led to, as a JSON line
// (package logs) beside the report a person reads.
func logFindings(log *slog.Logger, rep reconcile.Report) {
	log = log.With("run_id", rep.RunID)
	for _, a := range rep.Anomalies {
		level := slog.LevelInfo
		if a.Severity != reconcile.Info {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "anomaly detected", logs.Event, logs.EventReconcileAnomaly, "anomaly_type", a.Type,
			"severity", a.Severity, logs.SKUID, a.SKU, "object", a.Object, "delta", a.Delta)
		if a.Repair != nil {
			log.Log(context.Background(), level, "repair created", logs.Event, logs.EventReconcileRepairCreated, "anomaly_type", a.Type,
				"object", a.Object, "repair_id", a.Repair.ID, "rule", a.Repair.Rule, "outcome", a.Repair.Outcome)
		}
	}
}
