package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/control"
)

// heartbeatFresh: heartbeats older than this are from consumers that are gone.
const heartbeatFresh = 30 * time.Second

// capacitySettle is how long after a resize the consumers' rate is taken
// as PostgreSQL's capacity (three heartbeats).
const capacitySettle = 15 * time.Second

// reasonSuspended is the scaling reason while spec.scaling.suspendConsumers holds.
const reasonSuspended = "suspended by spec.scaling.suspendConsumers"

// measure fills the per-SKU counters and the backlog from the stores.
func (r *SeckillActivityReconciler) measure(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, now time.Time) (control.Backlog, error) {
	counts, backlog, err := store.Counts(ctx, act.Spec.ActivityID, skusOf(act), now)
	if err != nil {
		return backlog, err
	}
	observeInventory(act.Spec.ActivityID, counts, backlog)
	st := &act.Status
	var stock, sold int64
	for i := range st.SKUs {
		for _, c := range counts {
			if c.ID != st.SKUs[i].ID {
				continue
			}
			st.SKUs[i].Sold = c.Occupied + c.Sold
			st.SKUs[i].OpenReservations = c.RedisOpen
			st.SKUs[i].Remaining = max(c.RedisAvailable, 0)
		}
		stock += st.SKUs[i].Stock
		sold += st.SKUs[i].Sold
	}
	st.Sold = fmt.Sprintf("%d/%d", sold, stock)
	st.OpenReservations = backlog.Open
	st.OldestBacklogAgeSeconds = int64(backlog.OldestAge / time.Second)
	return backlog, nil
}

// scale reads what the consumers and PostgreSQL report and decides the
// order-consumer count (scaling.go); the measured capacity and the reason
// go to status, a change to an event.
func (r *SeckillActivityReconciler) scale(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, b control.Backlog, now time.Time) int32 {
	st := &act.Status
	sp := act.Spec.Scaling
	current := st.DesiredConsumers
	if current == 0 {
		current = max(sp.MinConsumers, 1)
	}
	if stopped(act) {
		st.ScalingReason = "the sale is completed: the workloads are stopped"
		return 0
	}
	if sp.SuspendConsumers {
		if st.ScalingReason != reasonSuspended {
			r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "ScaledConsumers", "Scale", "%d → 0: %s", st.DesiredConsumers, reasonSuspended)
			t := metav1.NewTime(now)
			st.LastScaleTime = &t
		}
		st.ScalingReason = reasonSuspended
		return 0
	}
	cons, err := store.ReadConsumers(ctx, act.Spec.ActivityID, heartbeatFresh)
	if err != nil {
		logf.FromContext(ctx).Info("consumer heartbeats unreadable; keeping the consumer count", "error", err.Error())
		return current
	}
	r.sampleDB(ctx, act, store, now)
	capacity := float64(st.MeasuredPostgresCapacity)
	if sp.PostgresCapacityOverride != nil {
		capacity = float64(*sp.PostgresCapacityOverride)
	}
	since := time.Hour
	if st.LastScaleTime != nil {
		since = now.Sub(st.LastScaleTime.Time)
	}
	d := DecideScale(ScaleInput{Current: current, Min: max(sp.MinConsumers, 1), Max: max(sp.MaxConsumers, 1),
		Backlog: b.Open, OldestAge: b.OldestAge, TargetDrain: dur(sp.TargetDrainTime, 5*time.Minute),
		Live: cons.Live, Rate: cons.Rate, P50: cons.P50, P99: cons.P99,
		LatencyBudget: dur(sp.LatencyBudget, 100*time.Millisecond), Capacity: capacity, SinceLastScale: since,
		ScaleDownAfter: dur(sp.ScaleDownStabilization, defaultScaleDownAfter)})
	st.CommitRate = int32(cons.Rate)
	// What PostgreSQL delivered at its latency budget is what it sustains —
	// measured only when the rate is the consumers' full effort: every
	// consumer reporting, busy with a backlog, settled since the last
	// resize (pods starting report a rate averaged with their idle start and
	// a cold p99). A rate above the measured capacity without saturation
	// proves the measurement stale: it is dropped.
	steady := cons.Live >= int(current) && since >= capacitySettle && b.Open > 0
	switch {
	case d.Saturated && cons.Rate > 0 && steady:
		st.MeasuredPostgresCapacity = int32(cons.Rate)
	case !d.Saturated && st.MeasuredPostgresCapacity > 0 && cons.Rate > float64(st.MeasuredPostgresCapacity):
		st.MeasuredPostgresCapacity = 0
	}
	st.ScalingReason = d.Reason
	if d.Desired != current || st.DesiredConsumers == 0 {
		t := metav1.NewTime(now)
		st.LastScaleTime = &t
		if st.DesiredConsumers != 0 {
			r.Recorder.Eventf(act, nil, corev1.EventTypeNormal, "ScaledConsumers", "Scale", "%d → %d: %s", current, d.Desired, d.Reason)
		}
	}
	return d.Desired
}

// sampleDB turns two pg_stat_database samples into PostgreSQL's commit
// rate; the previous sample is in status (it survives a change of leader).
func (r *SeckillActivityReconciler) sampleDB(ctx context.Context, act *seckillv1alpha1.SeckillActivity, store ActivityStore, now time.Time) {
	commits, err := store.DBCommits(ctx)
	if err != nil {
		return
	}
	p := progressOf(&act.Status)
	if prev := p.DatabaseCommits; prev != nil && now.Sub(prev.At.Time) >= time.Second {
		act.Status.DatabaseCommitRate = int32(float64(commits-prev.Value) / now.Sub(prev.At.Time).Seconds()) //nolint:gosec // a rate per second
	}
	p.DatabaseCommits = &seckillv1alpha1.CounterSample{Value: commits, At: metav1.NewMicroTime(now)}
}

// progressOf is the status's progress, made when absent.
func progressOf(st *seckillv1alpha1.SeckillActivityStatus) *seckillv1alpha1.OperatorProgress {
	if st.Progress == nil {
		st.Progress = &seckillv1alpha1.OperatorProgress{}
	}
	return st.Progress
}
