package controllers

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/reconcile"
)

// The reconcile job's metrics of design.md#metrics. The job is a short-lived
// CronJob pod with nothing to scrape, so it records each run and its
// anomalies in PostgreSQL and the operator, which reads them anyway,
// counts them on its own /metrics. Labels: the activity's id and the
// anomaly type (both bounded).
var (
	reconcileAnomalies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reconcile_anomaly_total", Help: "Anomalies the reconcile job found, by type."}, []string{"activity", "type"})
	reconcileAutoRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reconcile_auto_repair_total", Help: "Anomalies the reconcile job repaired automatically in the run that found them, by type."}, []string{"activity", "type"})
	reconcileManual = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reconcile_manual_total", Help: "Anomalies the reconcile job left for manual review, by type."}, []string{"activity", "type"})
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "seckill_reconcile_run_duration_seconds", Help: "Duration of the reconcile job's runs.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 14)}, []string{"activity"})
)

// alertedAnomalies are the reconcile_anomaly_total types the chart's alerts
// watch (charts/seckill-operator/files/alerts.yaml): their series exist at 0
// from the operator's first look at an activity, so that increase() sees
// the first anomaly (a series born at 1 has no increase).
var alertedAnomalies = []string{reconcile.PGInvariant, reconcile.RedisInvariant, reconcile.CrossSystem,
	reconcile.RulePaidAfterCancel, reconcile.RulePaidCancelledGuard}

func init() {
	crmetrics.Registry.MustRegister(reconcileAnomalies, reconcileAutoRepairs, reconcileManual, reconcileDuration)
}

// countRuns adds the activity's reconcile runs finished since the last
// look to the metrics (a run's anomalies and its finish are committed in
// one transaction by the job, so a finished run is complete). Where the
// last look ended is in status, so a new leader goes on from there; runs
// that finished before the operator first looked at the activity are
// history, not counted.
func (r *SeckillActivityReconciler) countRuns(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, last *control.Run) error {
	a := strconv.FormatInt(act.Spec.ActivityID, 10)
	for _, typ := range alertedAnomalies {
		reconcileAnomalies.WithLabelValues(a, typ)
	}
	p := progressOf(&act.Status)
	if p.ReconcileRunsCountedUntil == nil {
		// The first look. "Nothing yet" is the epoch, not the zero time:
		// a zero MicroTime is written as null and would read back as
		// "never looked", and the first run would then be taken for history.
		at := metav1.NewMicroTime(time.Unix(0, 0).UTC())
		if last != nil {
			at = metav1.NewMicroTime(last.FinishedAt)
		}
		p.ReconcileRunsCountedUntil = &at
		if last != nil {
			return nil
		}
	}
	runs, err := store.RunsSince(ctx, act.Spec.ActivityID, p.ReconcileRunsCountedUntil.Time)
	if err != nil || len(runs) == 0 {
		return err
	}
	for _, run := range runs {
		reconcileDuration.WithLabelValues(a).Observe(run.Duration.Seconds())
		for typ, f := range run.ByType {
			reconcileAnomalies.WithLabelValues(a, typ).Add(float64(f.Found))
			reconcileAutoRepairs.WithLabelValues(a, typ).Add(float64(f.AutoRepaired))
			reconcileManual.WithLabelValues(a, typ).Add(float64(f.Manual))
		}
	}
	at := metav1.NewMicroTime(runs[len(runs)-1].FinishedAt)
	p.ReconcileRunsCountedUntil = &at
	return nil
}
