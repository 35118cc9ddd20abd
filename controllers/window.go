package controllers

import (
	"context"
	"time"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// windowState is the window flag the gateway must obey now, and when it
// next changes by itself (zero: it does not).
func windowState(spec *seckillv1alpha1.SeckillActivitySpec, now time.Time) (string, time.Time) {
	start, end := spec.Schedule.Start.Time, spec.Schedule.End.Time
	switch {
	case !now.Before(end):
		return redisstore.WindowEnded, time.Time{}
	case spec.Paused:
		return redisstore.WindowPaused, end
	case now.Before(start):
		return redisstore.WindowNotStarted, start
	default:
		return redisstore.WindowActive, end
	}
}

// moveWindow sets the window flag for now and returns when it next changes.
func (r *SeckillActivityReconciler) moveWindow(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, now time.Time) (time.Time, error) {
	state, next := windowState(&act.Spec, now)
	err := store.SetWindow(ctx, act.Spec.ActivityID, skusOf(act), control.Settings{Window: state,
		BusinessDeadline: dur(act.Spec.BusinessDeadline, defaultDeadline), PaymentWindow: dur(act.Spec.PaymentWindow, defaultPaymentWindow),
		Generation: act.Generation})
	if err != nil {
		return time.Time{}, err
	}
	return next, nil
}
