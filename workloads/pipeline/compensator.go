package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// Compensator runs compensation tasks.
type Compensator struct {
	Worker  *compensation.Worker
	Batch   int
	Log     *slog.Logger
	Metrics *metrics.Compensator
	Health  *metrics.Health
	// Once makes Run return when no task is due (a scheduled sweep).
	Once bool
}

// Run compensates until ctx ends (or, with Once, until nothing is due).
func (c *Compensator) Run(ctx context.Context) error {
	if c.Metrics == nil {
		c.Metrics = metrics.NewCompensator(prometheus.NewRegistry())
	}
	c.Health.Ready()
	for ctx.Err() == nil {
		c.Health.Beat()
		tasks, err := c.Worker.Claim(ctx, c.Batch)
		if err != nil {
			c.Log.Warn("claim failed", logs.Err(err)...)
			idle(ctx, time.Second)
			continue
		}
		if len(tasks) == 0 {
			if c.Once {
				return nil
			}
			idle(ctx, 50*time.Millisecond)
			continue
		}
		debug := c.Log.Enabled(ctx, slog.LevelDebug) // one line per task: debug
		for _, t := range tasks {
			tctx := tracing.FromTraceparent(ctx, t.Traceparent) // its lines carry the reservation's trace
			fields := []any{logs.ReservationID, t.ReservationID, logs.CompensationID, t.CompensationID, logs.AttemptCount, t.Attempt, logs.SKUID, t.Slot.SKUID}
			if debug {
				c.Log.DebugContext(tctx, "compensation authorized by its task", append(fields, logs.Event, logs.EventCompensationAuthorized)...)
			}
			outcome, reason, err := c.Worker.Run(ctx, t)
			c.Metrics.Total.WithLabelValues(outcome).Inc()
			fields = append(fields, "outcome", outcome, "reason", reason)
			switch {
			case reason == "ALREADY_COMPENSATED":
				c.Metrics.AlreadyApplied.Inc()
				c.Log.InfoContext(tctx, "compensation found already applied in Redis", append(fields, logs.Event, logs.EventCompensationAlready)...)
			case reason == "RESERVATION_MISSING":
				c.Metrics.RedisMissing.Inc()
				c.Log.WarnContext(tctx, "compensation: the Redis reservation is missing; left for a person", append(fields, logs.Event, logs.EventCompensationRedisMissing)...)
			case outcome == compensation.OutcomeManual:
				c.Metrics.StateConflict.Inc()
			case outcome == compensation.OutcomeApplied && err == nil && debug:
				c.Log.DebugContext(tctx, "compensation applied in Redis", append(fields, logs.Event, logs.EventCompensationRedisApplied)...)
			}
			if err != nil || (outcome != compensation.OutcomeApplied && reason != "RESERVATION_MISSING") {
				c.Log.WarnContext(tctx, "compensation not applied", append(fields, logs.Err(err)...)...)
			}
		}
	}
	return nil
}
