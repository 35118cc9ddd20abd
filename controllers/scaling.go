package controllers

import (
	"fmt"
	"math"
	"time"
)

// ScaleInput is what the operator knows when it sizes the order consumers.
type ScaleInput struct {
	Current, Min, Max int32
	// Backlog: reservations PostgreSQL has not decided, and the oldest's age.
	Backlog   int64
	OldestAge time.Duration
	// TargetDrain is how fast a backlog should drain.
	TargetDrain time.Duration
	// Live consumers reporting; Rate their summed commit rate (orders/s);
	// P50/P99 their commit latency.
	Live     int
	Rate     float64
	P50, P99 time.Duration
	// LatencyBudget: a p99 above it means PostgreSQL is saturated.
	LatencyBudget time.Duration
	// Capacity is the order commits/s PostgreSQL sustains (the override, or
	// the rate measured when it reached the latency budget; 0: unknown).
	Capacity float64
	// SinceLastScale is how long ago the consumers were last resized.
	SinceLastScale time.Duration
	// ScaleDownAfter is the hysteresis: the consumers shrink only when the
	// last resize is this old, and by one at a time (0: 3 minutes).
	ScaleDownAfter time.Duration
}

// ScaleDecision is the desired consumer count and why.
type ScaleDecision struct {
	Desired int32
	Reason  string
	// Saturated: PostgreSQL is at its latency budget; Rate is then its capacity.
	Saturated bool
}

// defaultScaleDownAfter is ScaleDownAfter when the spec leaves it out.
const defaultScaleDownAfter = 3 * time.Minute

// scaleUpAfter: the consumers grow again (or shed one for an overloaded
// PostgreSQL) only when the last resize is this old, so that the pods it
// changed are running and reporting before the same heartbeats ask for
// another step. Without it every reconcile (each Deployment status change
// brings one) is a step: 1→4 or 3→1 within a second on a real node.
const scaleUpAfter = 10 * time.Second

// defaultPerConsumer is the assumed rate of one consumer before any heartbeat.
const defaultPerConsumer = 50.0

// DecideScale sizes the order consumers (design.md#backlog): enough to drain the
// backlog within the target drain time, never more than PostgreSQL
// sustains, no growth while PostgreSQL is saturated, growth at most doubling
// per step, shrinking slowly.
func DecideScale(in ScaleInput) ScaleDecision {
	// A consumer's rate, from two lower bounds of it: it runs one
	// transaction at a time, at least one order each (1/p50 of the commit
	// latency), and a transaction may carry a received batch, so what the
	// consumers commit per consumer is also what one can (measured here:
	// batches of up to 16 made one consumer ~3× its 1/p50).
	perConsumer := defaultPerConsumer
	if in.P50 > 0 || (in.Live > 0 && in.Rate > 0) {
		perConsumer = 0
		if in.P50 > 0 {
			perConsumer = float64(time.Second) / float64(in.P50)
		}
		if in.Live > 0 && in.Rate > 0 {
			perConsumer = max(perConsumer, in.Rate/float64(in.Live))
		}
	}
	drain := in.TargetDrain
	if drain <= 0 {
		drain = 5 * time.Minute
	}
	need := int32(0)
	if in.Backlog > 0 {
		need = int32(math.Ceil(float64(in.Backlog) / (drain.Seconds() * perConsumer)))
	}
	if in.OldestAge > drain && need <= in.Current {
		need = in.Current + 1 // already late: one more, within the limits below
	}
	reason := fmt.Sprintf("backlog %d (oldest %s) at %.0f orders/s per consumer needs %d", in.Backlog, in.OldestAge.Round(time.Second), perConsumer, need)
	desired := need

	saturated := in.LatencyBudget > 0 && in.P99 > in.LatencyBudget && in.Live > 0
	overloaded := saturated && in.P99 > 2*in.LatencyBudget
	if saturated && desired > in.Current {
		desired = in.Current
		reason = fmt.Sprintf("PostgreSQL saturated (commit p99 %s > budget %s): holding at %d", in.P99.Round(time.Millisecond), in.LatencyBudget, in.Current)
	}
	if overloaded && in.Current > in.Min && in.SinceLastScale >= scaleUpAfter {
		desired = in.Current - 1
		reason = fmt.Sprintf("PostgreSQL overloaded (commit p99 %s > 2× budget): one consumer fewer", in.P99.Round(time.Millisecond))
	}
	if in.Capacity > 0 {
		byCapacity := int32(math.Max(1, math.Floor(in.Capacity/perConsumer)))
		if desired > byCapacity {
			desired = byCapacity
			reason = fmt.Sprintf("capped at %d: PostgreSQL sustains %.0f orders/s, %.0f per consumer", byCapacity, in.Capacity, perConsumer)
		}
	}
	if in.Current > 0 && desired > 2*in.Current+1 {
		desired = 2*in.Current + 1
		reason += fmt.Sprintf("; stepping to %d (at most doubling)", desired)
	}
	if desired > in.Current && in.Current > 0 && in.SinceLastScale < scaleUpAfter {
		desired = in.Current
		reason = fmt.Sprintf("holding at %d: last resize %s ago (grows again after %s)", in.Current, in.SinceLastScale.Round(time.Second), scaleUpAfter)
	}
	if desired < in.Current && !overloaded {
		stable := in.ScaleDownAfter
		if stable <= 0 {
			stable = defaultScaleDownAfter
		}
		if in.SinceLastScale < stable {
			desired = in.Current
			reason = fmt.Sprintf("holding at %d: last resize %s ago (shrinks after %s)", in.Current, in.SinceLastScale.Round(time.Second), stable)
		} else {
			desired = in.Current - 1
			reason += "; shrinking by one"
		}
	}
	if desired < in.Min {
		desired = in.Min
	}
	if desired > in.Max {
		desired = in.Max
		reason += fmt.Sprintf("; limited by maxConsumers %d", in.Max)
	}
	return ScaleDecision{Desired: desired, Reason: reason, Saturated: saturated}
}
