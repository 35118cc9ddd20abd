package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
)

// lifecycle moves the phase (an event for each transition): Scheduled before
// the start, Active or Paused during the sale, Draining after the end while
// reservations wait for PostgreSQL (at most one business deadline), then
// Reconciling while the final reconcile run works, and Completed — or
// Failed when that run reports what it could not repair. It returns when
// the phase next changes by the clock (zero: not by the clock).
func (r *SeckillActivityReconciler) lifecycle(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, b control.Backlog, now time.Time) (time.Time, error) {
	st := &act.Status
	prev := st.Phase
	start, end := act.Spec.Schedule.Start.Time, act.Spec.Schedule.End.Time
	drainUntil := end.Add(dur(act.Spec.BusinessDeadline, defaultDeadline))
	var next time.Time
	switch {
	case now.Before(end) && act.Spec.Paused:
		st.Phase = seckillv1alpha1.PhasePaused
	case now.Before(start):
		st.Phase = seckillv1alpha1.PhaseScheduled
	case now.Before(end):
		st.Phase = seckillv1alpha1.PhaseActive
	case b.Open > 0 && now.Before(drainUntil):
		st.Phase, next = seckillv1alpha1.PhaseDraining, drainUntil
	default:
		done, ok, err := r.ensureFinalReconcile(ctx, act)
		if err != nil {
			return next, err
		}
		switch {
		case !done:
			st.Phase = seckillv1alpha1.PhaseReconciling
			setCondition(act, seckillv1alpha1.ConditionReconciled, false, "Running", "the final reconcile run is working")
		case ok:
			st.Phase = seckillv1alpha1.PhaseCompleted
			setCondition(act, seckillv1alpha1.ConditionReconciled, true, "Clean", "the final reconcile run found nothing it could not repair")
		default:
			st.Phase = seckillv1alpha1.PhaseFailed
			setCondition(act, seckillv1alpha1.ConditionReconciled, false, "AnomaliesLeft",
				"the final reconcile run left anomalies for manual review (see seckill reconcile's report)")
		}
	}
	if run, err := store.LastRun(ctx, act.Spec.ActivityID); err == nil {
		if run != nil {
			st.LastReconcile = &seckillv1alpha1.ReconcileSummary{RunID: run.ID, FinishedAt: metav1.NewTime(run.FinishedAt),
				Result: run.Status, Anomalies: run.Anomalies, AutoRepaired: run.AutoRepaired, Manual: run.Manual}
		}
		if err := r.countRuns(ctx, act, store, run); err != nil {
			logf.FromContext(ctx).Info("reconcile runs not counted", "error", err.Error())
		}
	}
	if st.Phase == seckillv1alpha1.PhaseCompleted && prev != seckillv1alpha1.PhaseCompleted {
		// The sale is over and reconciled: its Redis keys are kept for the
		// retention, then expire; PostgreSQL keeps everything.
		retention := dur(act.Spec.Retention, defaultRetention)
		n, err := store.Archive(ctx, act.Spec.ActivityID, skusOf(act), retention)
		if err != nil {
			return next, err
		}
		r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "Archived", "Archive", "%d Redis keys expire in %s", n, retention)
	}
	if st.Phase != prev {
		typ := corev1.EventTypeNormal
		if st.Phase == seckillv1alpha1.PhaseFailed {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(act, nil, typ, string(st.Phase), "Phase", "%s → %s", orNone(prev), st.Phase)
	}
	return next, nil
}

func orNone(p seckillv1alpha1.Phase) string {
	if p == "" {
		return "(none)"
	}
	return string(p)
}

// finalize archives a deleted activity: traffic stops (window ENDED), Redis
// keys expire after the retention, PostgreSQL's orders and ledger stay. The
// finalizer goes only once that is done (or AnnotationSkipArchive says so).
func (r *SeckillActivityReconciler) finalize(ctx context.Context, act *seckillv1alpha1.SeckillActivity) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(act, Finalizer) {
		return ctrl.Result{}, nil
	}
	if act.Annotations[AnnotationSkipArchive] != "true" {
		store, e, err := r.open(ctx, act, false) // a bad workload key must not block the archive
		if err != nil {
			return r.degraded(ctx, act.DeepCopy(), act, fmt.Errorf("archiving before deletion: %w", err))
		}
		retention := dur(act.Spec.Retention, defaultRetention)
		n, err := store.Archive(ctx, act.Spec.ActivityID, skusOf(act), retention)
		if err != nil {
			return r.degraded(ctx, act.DeepCopy(), act, fmt.Errorf("archiving before deletion: %w", err))
		}
		if err := dropDBRoles(ctx, act, store); err != nil {
			return r.degraded(ctx, act.DeepCopy(), act, fmt.Errorf("dropping the workloads' PostgreSQL roles: %w", err))
		}
		if err := r.deleteMessaging(ctx, act, e); err != nil {
			return r.degraded(ctx, act.DeepCopy(), act, adminError(fmt.Errorf("deleting the activity's topics and groups: %w", err)))
		}
		r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "Archived", "Archive",
			"traffic stopped; %d Redis keys expire in %s; PostgreSQL business data kept", n, retention)
	}
	controllerutil.RemoveFinalizer(act, Finalizer)
	if err := r.Update(ctx, act); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer: %w", err)
	}
	r.forget(act)
	return ctrl.Result{}, nil
}
