package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// Projector applies order events to the Redis projection.
type Projector struct {
	MQ        *mq.Consumer
	Redis     *redisstore.Store
	Pool      *pgxpool.Pool
	Group     string
	Invisible time.Duration
	Log       *slog.Logger
	Metrics   *metrics.Projector
	Health    *metrics.Health
	// TerminalTTL is how long a released reservation stays (default 7 days).
	TerminalTTL time.Duration
}

func (p *Projector) terminalTTL() time.Duration {
	if p.TerminalTTL > 0 {
		return p.TerminalTTL
	}
	return 7 * 24 * time.Hour
}

// Run projects until ctx ends.
func (p *Projector) Run(ctx context.Context) error {
	if p.Metrics == nil {
		p.Metrics = metrics.NewProjector(prometheus.NewRegistry())
	}
	receiveLoop(ctx, p.MQ, p.Invisible, p.Health, p.Log, p.handle)
	return nil
}

func (p *Projector) handle(ctx context.Context, d mq.Delivery) {
	eventID, err := uuid.Parse(d.MessageID)
	var ev events.Event
	if err == nil {
		ev, err = events.ParseEvent(d.Body)
	}
	if err != nil {
		if quarantine(ctx, p.MQ, p.Pool, orderstore.Quarantined{Group: p.Group, Reason: events.ReasonOf(err), Detail: "event refused: " + err.Error()}, d, p.Log) {
			p.Metrics.Projected.WithLabelValues("QUARANTINED").Inc()
		}
		return
	}
	result := "IGNORED" // payments: for systems downstream
	switch e := ev.(type) {
	case events.OrderCreated:
		slot := redisstore.Slot{ActivityID: e.ActivityID, SKUID: e.SKUID, Bucket: e.Bucket}
		res, err := p.Redis.ProjectOrderCreated(ctx, slot, e.ReservationID, e.OrderID, time.Now())
		if err != nil {
			retryLater(p.MQ, d, time.Second, p.Log)
			return
		}
		result = res.Reason
		if !res.OK() {
			// Missing or conflicting projection: the reconcile job rebuilds it
			// from PostgreSQL (design.md#auto-repair row 1); recorded, not retried forever.
			p.Log.Warn("projection refused", "reservation_id", e.ReservationID, "reason", res.Reason)
		}
	case events.CompensateRequired:
		// The refusal is shown (GET answers ORDER_REJECTED with its reason);
		// the compensator restores the stock.
		slot := redisstore.Slot{ActivityID: e.ActivityID, SKUID: e.SKUID, Bucket: e.Bucket}
		res, err := p.Redis.ProjectOrderRejected(ctx, slot, e.ReservationID, e.Reason, time.Now())
		if err != nil {
			retryLater(p.MQ, d, time.Second, p.Log)
			return
		}
		result = res.Reason
		if !res.OK() && res.Code != -1 {
			// A lost hash is the compensator's and the reconcile job's;
			// a conflict is recorded, not retried forever.
			p.Log.Warn("rejection projection refused", "reservation_id", e.ReservationID, "reason", res.Reason)
		}
	case events.OrderCancelled:
		slot := redisstore.Slot{ActivityID: e.ActivityID, SKUID: e.SKUID, Bucket: e.Bucket}
		res, err := p.Redis.ReleaseAfterCancel(ctx, slot, e.ReservationID, e.OrderID, time.Now(), p.terminalTTL())
		if err != nil {
			retryLater(p.MQ, d, time.Second, p.Log)
			return
		}
		result = res.Reason
		if !res.OK() {
			p.Log.Warn("release refused", "reservation_id", e.ReservationID, "reason", res.Reason)
		}
	}
	if err := orderstore.RecordProjection(ctx, p.Pool, p.Group, d.Topic, ev.Type(), eventID, ev.Reservation(), d.Body, result); err != nil {
		retryLater(p.MQ, d, time.Second, p.Log)
		return
	}
	p.Metrics.Projected.WithLabelValues(result).Inc()
	ackDone(ctx, p.MQ, d, p.Log)
}
