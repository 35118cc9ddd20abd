package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/metrics"
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
			c.Log.Warn("claim failed", "error", err)
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
		for _, t := range tasks {
			outcome, reason, err := c.Worker.Run(ctx, t)
			c.Metrics.Total.WithLabelValues(outcome).Inc()
			switch {
			case reason == "ALREADY_COMPENSATED":
				c.Metrics.AlreadyApplied.Inc()
			case reason == "RESERVATION_MISSING":
				c.Metrics.RedisMissing.Inc()
			case outcome == compensation.OutcomeManual:
				c.Metrics.StateConflict.Inc()
			}
			if err != nil || outcome != compensation.OutcomeApplied {
				c.Log.Warn("compensation not applied", "reservation_id", t.ReservationID, "outcome", outcome, "reason", reason, "error", err)
			}
		}
	}
	return nil
}
