package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
)

// health sets the conditions GitOps tools judge an activity by — Ready,
// Reconciling, Stalled — from what this pass found, and records the
// generation they are about in status.observedGeneration. stalled is the
// failure the pass ended on (nil: none). A pass cut short by the API
// server (failed) does not call it: nothing was judged.
func health(act *seckillv1alpha1.SeckillActivity, stalled error) {
	st := &act.Status
	ready, reconciling, isStalled := false, false, stalled != nil
	var reason, msg string
	switch {
	case stalled != nil:
		reason, msg = reasonOf(stalled), stalled.Error()
	case st.Phase == seckillv1alpha1.PhaseFailed:
		isStalled, reason, msg = true, "Failed", "the activity failed; see the Degraded condition and its events"
	case st.Phase == seckillv1alpha1.PhaseCompleted:
		ready, reason, msg = true, "Completed", "the sale is over and reconciled"
	case !provisionedNow(act):
		reconciling, reason, msg = true, "Provisioning", fmt.Sprintf("provisioning the stock of generation %d", act.Generation)
	case st.Phase == seckillv1alpha1.PhaseDraining:
		reconciling, reason, msg = true, "Draining", "the sale has ended; the order backlog is being worked off"
	case st.Phase == seckillv1alpha1.PhaseReconciling:
		reconciling, reason, msg = true, "FinalReconcile", "the final reconcile run is working"
	case !conditionTrue(act, seckillv1alpha1.ConditionWorkloadsReady):
		reconciling, reason, msg = true, "WaitingForWorkloads", "waiting for the workloads' pods"
	default:
		ready, reason, msg = true, string(st.Phase), fmt.Sprintf("generation %d is provisioned and every workload is ready", act.Generation)
	}
	setCondition(act, seckillv1alpha1.ConditionReady, ready, reason, msg)
	if reconciling {
		setCondition(act, seckillv1alpha1.ConditionReconciling, true, reason, msg)
	} else {
		setCondition(act, seckillv1alpha1.ConditionReconciling, false, "Settled", "nothing in progress")
	}
	if isStalled {
		setCondition(act, seckillv1alpha1.ConditionStalled, true, reason, msg)
	} else {
		setCondition(act, seckillv1alpha1.ConditionStalled, false, "NotStalled", "the last pass found nothing blocking")
	}
	st.ObservedGeneration = act.Generation
}

// provisionedNow: the stock of the current generation is provisioned.
func provisionedNow(act *seckillv1alpha1.SeckillActivity) bool {
	c := meta.FindStatusCondition(act.Status.Conditions, seckillv1alpha1.ConditionStockProvisioned)
	return c != nil && c.Status == "True" && c.ObservedGeneration == act.Generation
}

// reconcilePaused tells whether a person asked the operator to leave the
// activity alone (seckill.io/reconcile: paused).
func reconcilePaused(act *seckillv1alpha1.SeckillActivity) bool {
	return act.Annotations[seckillv1alpha1.AnnotationReconcile] == seckillv1alpha1.ReconcilePausedValue
}

// holdForPerson is the whole pass while the annotation is set: only the
// ReconcilePaused condition (and an event when it starts) — no store,
// workload, phase or finalizer is touched, and nothing is requeued (the
// annotation's removal brings the activity back).
func (r *SeckillActivityReconciler) holdForPerson(ctx context.Context, act *seckillv1alpha1.SeckillActivity) (ctrl.Result, error) {
	before := act.DeepCopy()
	if !conditionTrue(act, seckillv1alpha1.ConditionReconcilePaused) {
		logf.FromContext(ctx).Info("reconciliation paused by annotation", "annotation", seckillv1alpha1.AnnotationReconcile)
		r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "ReconcilePaused", "Pause",
			"%s=%s: the operator changes nothing until the annotation is removed", seckillv1alpha1.AnnotationReconcile, seckillv1alpha1.ReconcilePausedValue)
	}
	setCondition(act, seckillv1alpha1.ConditionReconcilePaused, true, "AnnotationSet",
		fmt.Sprintf("%s=%s: the operator changes nothing until the annotation is removed", seckillv1alpha1.AnnotationReconcile, seckillv1alpha1.ReconcilePausedValue))
	return ctrl.Result{}, r.patchStatus(ctx, before, act)
}

// resumeAfterPerson marks the pause over (the pass then runs as usual).
func (r *SeckillActivityReconciler) resumeAfterPerson(act *seckillv1alpha1.SeckillActivity) {
	if conditionTrue(act, seckillv1alpha1.ConditionReconcilePaused) {
		r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "ReconcileResumed", "Resume", "the annotation %s is gone: reconciling again", seckillv1alpha1.AnnotationReconcile)
		setCondition(act, seckillv1alpha1.ConditionReconcilePaused, false, "AnnotationRemoved", "the operator reconciles the activity")
	}
}
