package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
)

// guardBacklog is the backlog guard of design.md#backlog (control.GuardDecision): while the
// oldest undecided reservation is older than the threshold, time-driven
// compensation pauses (the flag in activity_control that deadline
// rejections obey); it resumes once the backlog is younger than half the
// threshold. The condition remembers the decision.
func (r *SeckillActivityReconciler) guardBacklog(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, b control.Backlog) error {
	threshold := dur(act.Spec.Scaling.CompensationPauseAfter, control.DefaultPauseAfter)
	wasPaused := conditionTrue(act, seckillv1alpha1.ConditionCompensationPaused)
	pause, reason := control.GuardDecision(b, threshold, wasPaused)
	changed, err := store.SetCompensationPaused(ctx, act.Spec.ActivityID, pause, reason)
	if err != nil {
		return err
	}
	if pause {
		setCondition(act, seckillv1alpha1.ConditionCompensationPaused, true, "BacklogTooOld", reason)
		setCondition(act, seckillv1alpha1.ConditionBacklogHealthy, false, "BacklogTooOld", reason)
	} else {
		setCondition(act, seckillv1alpha1.ConditionCompensationPaused, false, "BacklogHealthy", reason)
		setCondition(act, seckillv1alpha1.ConditionBacklogHealthy, true, "BacklogHealthy", reason)
	}
	if changed || pause != wasPaused {
		what, typ := "CompensationResumed", corev1.EventTypeNormal
		if pause {
			what, typ = "CompensationPaused", corev1.EventTypeWarning
		}
		r.Recorder.Eventf(act, nil, typ, what, "BacklogGuard", "%s", reason)
	}
	return nil
}

func conditionTrue(act *seckillv1alpha1.SeckillActivity, typ string) bool {
	for _, c := range act.Status.Conditions {
		if c.Type == typ {
			return c.Status == "True"
		}
	}
	return false
}
