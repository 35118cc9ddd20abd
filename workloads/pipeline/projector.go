package pipeline

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/inbox"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// Projector applies order events to the Redis projection.
//
// It works set-wise, as the order consumer does: a received batch is
// applied to Redis in one pipeline (each event's script still alone and
// atomic), recorded in its inbox in one statement, and acknowledged in the
// background — three round trips for up to 16 events where one event at a
// time took three each. Under a backlog (after a broker restart) that is
// the difference between keeping up and falling behind the orders.
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
	acks        *acker
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
	p.acks = newAcker(p.MQ, p.Log)
	defer p.acks.wait()
	receiveBatches(ctx, p.MQ, p.Invisible, p.Health, p.Log, p.handleBatch)
	return nil
}

// projected is one parsed delivery of a batch and what it asks of Redis.
type projected struct {
	d     mq.Delivery
	id    uuid.UUID
	ev    events.Event
	redis *redisstore.Projection // nil: nothing to apply (payments, for systems downstream)
	ctx   context.Context        // its project span's (design.md#traces)
	span  trace.Span
}

// refusals is what a refused projection logs, by kind.
var refusals = map[redisstore.ProjectionKind]string{
	redisstore.ProjectCreated: "projection refused", redisstore.ProjectRejected: "rejection projection refused",
	redisstore.ProjectCancelled: "release refused",
}

// projection is what ev asks of Redis (nil: nothing).
func projection(ev events.Event) *redisstore.Projection {
	switch e := ev.(type) {
	case events.OrderCreated:
		return &redisstore.Projection{Kind: redisstore.ProjectCreated, Slot: slotOf(e.ActivityID, e.SKUID, e.Bucket),
			ReservationID: e.ReservationID, OrderID: e.OrderID}
	case events.CompensateRequired:
		// The refusal is shown (GET answers ORDER_REJECTED with its reason);
		// the compensator restores the stock.
		return &redisstore.Projection{Kind: redisstore.ProjectRejected, Slot: slotOf(e.ActivityID, e.SKUID, e.Bucket),
			ReservationID: e.ReservationID, Reason: e.Reason}
	case events.OrderCancelled:
		return &redisstore.Projection{Kind: redisstore.ProjectCancelled, Slot: slotOf(e.ActivityID, e.SKUID, e.Bucket),
			ReservationID: e.ReservationID, OrderID: e.OrderID}
	}
	return nil
}

func slotOf(activity, sku int64, bucket int) redisstore.Slot {
	return redisstore.Slot{ActivityID: activity, SKUID: sku, Bucket: bucket}
}

// handleBatch applies a received batch: malformed events are quarantined;
// the rest go to Redis in one pipeline, then to the inbox in one
// statement, then are acknowledged. An event whose script or inbox row
// failed comes back in a second; the scripts answer it idempotently.
func (p *Projector) handleBatch(ctx context.Context, ds []mq.Delivery) {
	items := make([]projected, 0, len(ds))
	defer func() {
		for _, it := range items {
			it.span.End()
		}
	}()
	for _, d := range ds {
		eventID, err := uuid.Parse(d.MessageID)
		var ev events.Event
		if err == nil {
			ev, err = events.ParseEvent(d.Body)
		}
		if err != nil {
			if quarantine(ctx, p.MQ, p.Pool, inbox.Quarantined{Group: p.Group, Reason: events.ReasonOf(err), Detail: "event refused: " + err.Error()}, d, p.Log) {
				p.Metrics.Projected.WithLabelValues("QUARANTINED").Inc()
			}
			continue
		}
		ectx, span := tracing.Start(tracing.FromProperties(ctx, d.Properties, ""), tracing.SpanProject, trace.SpanKindConsumer,
			tracing.AttrEvent.String(ev.Type()), tracing.AttrReservation.String(ev.Reservation().String()), tracing.AttrBatch.Int(len(ds)))
		items = append(items, projected{d: d, id: eventID, ev: ev, redis: projection(ev), ctx: ectx, span: span})
	}
	var calls []redisstore.Projection
	for _, it := range items {
		if it.redis != nil {
			calls = append(calls, *it.redis)
		}
	}
	results, errs := p.Redis.Project(ctx, calls, time.Now(), p.terminalTTL())
	done := make([]projected, 0, len(items))
	records := make([]inbox.Projected, 0, len(items))
	next := 0
	for _, it := range items {
		result := "IGNORED" // payments: for systems downstream
		if it.redis != nil {
			res, err := results[next], errs[next]
			next++
			if err != nil {
				it.span.RecordError(err)
				p.Log.WarnContext(it.ctx, "projection not applied; redelivery", append([]any{logs.ReservationID, it.ev.Reservation(), logs.EventType, it.ev.Type()}, logs.Err(err)...)...)
				retryLater(p.MQ, it.d, time.Second, p.Log)
				continue
			}
			result = res.Reason
			it.span.SetAttributes(tracing.AttrResult.String(result))
			// A refusal is recorded, not retried forever: a missing or
			// conflicting projection is rebuilt from PostgreSQL by the
			// reconcile job (design.md#auto-repair row 1); a rejection
			// whose hash is gone (-1) is the compensator's.
			if !res.OK() && (it.redis.Kind != redisstore.ProjectRejected || res.Code != -1) {
				p.Log.WarnContext(it.ctx, refusals[it.redis.Kind], logs.ReservationID, it.ev.Reservation(), logs.EventType, it.ev.Type(), "reason", res.Reason)
			}
		}
		done = append(done, it)
		records = append(records, inbox.Projected{Topic: it.d.Topic, EventType: it.ev.Type(), EventID: it.id,
			ReservationID: it.ev.Reservation(), Payload: it.d.Body, Result: result})
	}
	if err := inbox.RecordProjections(ctx, p.Pool, p.Group, records); err != nil {
		p.Log.Warn("projection inbox not written; redelivery", "events", len(records), "error", err)
		for _, it := range done {
			retryLater(p.MQ, it.d, time.Second, p.Log)
		}
		return
	}
	for i, it := range done {
		p.Metrics.Projected.WithLabelValues(records[i].Result).Inc()
		p.acks.ack(ctx, it.d)
	}
}
