package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
)

// The reconcile job's metrics of design.md#metrics. The job is a short-lived
// CronJob pod with nothing to scrape, so it records each run and its
// anomalies in PostgreSQL and the operator, which reads them anyway,
// counts them on its own /metrics. Labels: the anomaly type only.
var (
	reconcileAnomalies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcile_anomaly_total", Help: "Anomalies the reconcile job found, by type."}, []string{"type"})
	reconcileAutoRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcile_auto_repair_total", Help: "Anomalies the reconcile job repaired automatically in the run that found them, by type."}, []string{"type"})
	reconcileManual = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcile_manual_total", Help: "Anomalies the reconcile job left for manual review, by type."}, []string{"type"})
	reconcileDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "reconcile_run_duration_seconds", Help: "Duration of the reconcile job's runs.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 14)})
)

func init() {
	crmetrics.Registry.MustRegister(reconcileAnomalies, reconcileAutoRepairs, reconcileManual, reconcileDuration)
}

// countRuns adds the activity's reconcile runs finished since the last
// look to the metrics (a run's anomalies and its finish are committed in
// one transaction by the job, so a finished run is complete). Runs that finished before the operator first looked
// at the activity are history, not counted (a restart does not replay them).
func (r *SeckillActivityReconciler) countRuns(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store *control.Store, last *control.Run) error {
	key := types.NamespacedName{Namespace: act.Namespace, Name: act.Name}
	r.mu.Lock()
	cursor, seen := r.runsSeen[key]
	if !seen {
		if r.runsSeen == nil {
			r.runsSeen = map[types.NamespacedName]runCursor{}
		}
		if last != nil {
			cursor.at = last.FinishedAt
		}
		r.runsSeen[key] = cursor
	}
	r.mu.Unlock()
	if !seen && last != nil {
		return nil
	}
	runs, err := store.RunsSince(ctx, act.Spec.ActivityID, cursor.at)
	if err != nil || len(runs) == 0 {
		return err
	}
	for _, run := range runs {
		reconcileDuration.Observe(run.Duration.Seconds())
		for typ, f := range run.ByType {
			reconcileAnomalies.WithLabelValues(typ).Add(float64(f.Found))
			reconcileAutoRepairs.WithLabelValues(typ).Add(float64(f.AutoRepaired))
			reconcileManual.WithLabelValues(typ).Add(float64(f.Manual))
		}
	}
	r.mu.Lock()
	r.runsSeen[key] = runCursor{at: runs[len(runs)-1].FinishedAt}
	r.mu.Unlock()
	return nil
}

type runCursor struct{ at time.Time }
