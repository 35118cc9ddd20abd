package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/inbox"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// OrderConsumer feeds order-create messages to the order transaction.
type OrderConsumer struct {
	MQ        *mq.Consumer
	Store     *orderstore.Consumer
	Invisible time.Duration
	Log       *slog.Logger
	// ID names this consumer in its heartbeat rows (empty: no heartbeats).
	ID         string
	ActivityID int64
	// HeartbeatEvery is how often the commit rate and latency are reported.
	HeartbeatEvery time.Duration
	// MaxAttempts is the group's delivery limit (retries + 1): a failure at
	// the last attempt sends the message to the DLQ and is counted.
	MaxAttempts int
	Metrics     *metrics.Consumer
	Health      *metrics.Health
	meter       control.Meter
	acks        *acker
}

// Run consumes until ctx ends.
func (c *OrderConsumer) Run(ctx context.Context) error {
	c.acks = newAcker(c.MQ, c.Log)
	defer c.acks.wait()
	if c.ID != "" {
		every := c.HeartbeatEvery
		if every <= 0 {
			every = 5 * time.Second
		}
		go c.heartbeats(ctx, every)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewConsumer(prometheus.NewRegistry(), c.Store.Group)
	}
	receiveBatches(ctx, c.MQ, c.Invisible, c.Health, c.Log, c.handleBatch)
	return nil
}

// handleBatch turns a received batch into orders in one transaction
// (orderstore.ConsumeBatch); a malformed message is quarantined first and
// never joins the batch. Each message has its consume span in its
// reservation's trace (design.md#traces), and under it the commit span of
// the batch's transaction.
func (c *OrderConsumer) handleBatch(ctx context.Context, ds []mq.Delivery) {
	items := make([]orderstore.Item, 0, len(ds))
	valid := make([]mq.Delivery, 0, len(ds))
	spans := make([]trace.Span, 0, len(ds))
	ctxs := make([]context.Context, 0, len(ds))
	for _, d := range ds {
		msg, err := events.ParseOrderCreateRequested(d.Body)
		if err != nil {
			var ie *events.InvalidError
			reason := events.ReasonMalformed
			if errors.As(err, &ie) {
				reason = ie.Reason
			}
			c.quarantine(ctx, d, nil, reason, err.Error())
			continue
		}
		mctx, span := tracing.Start(tracing.FromProperties(ctx, d.Properties, msg.Trace.Traceparent()), tracing.SpanConsume, trace.SpanKindConsumer)
		if span.IsRecording() { // the ids' strings only for a span that keeps them
			span.SetAttributes(tracing.AttrReservation.String(msg.ReservationID.String()), tracing.AttrMessage.String(msg.MessageID.String()),
				tracing.AttrAttempt.Int(d.Attempt), tracing.AttrBatch.Int(len(ds)))
		}
		items = append(items, orderstore.Item{Msg: msg, Raw: d.Body, Trace: tracing.Traceparent(mctx)})
		valid = append(valid, d)
		spans = append(spans, span)
		ctxs = append(ctxs, mctx)
	}
	if len(items) == 0 {
		return
	}
	commits := make([]trace.Span, len(items))
	for i := range items {
		_, commits[i] = tracing.Start(ctxs[i], tracing.SpanCommit, trace.SpanKindInternal)
	}
	t0 := time.Now()
	res := c.Store.ConsumeBatch(ctx, items)
	took := time.Since(t0)
	for i, r := range res {
		if commits[i].IsRecording() {
			commits[i].SetAttributes(tracing.AttrBatch.Int(len(items)), tracing.AttrResult.String(r.Outcome.Result),
				tracing.AttrOrder.String(r.Outcome.OrderID.String()))
		}
		tracing.End(commits[i], r.Err)
		c.settle(ctxs[i], valid[i], items[i].Msg, r.Outcome, r.Err, took)
		tracing.End(spans[i], r.Err)
	}
}

// settle acknowledges, retries or quarantines one delivery by its outcome.
func (c *OrderConsumer) settle(ctx context.Context, d mq.Delivery, msg events.OrderCreateRequested, out orderstore.Outcome, err error, took time.Duration) {
	if errors.Is(err, orderstore.ErrCommitUnknown) {
		c.Metrics.CommitUnknown.Inc()
		c.Log.WarnContext(ctx, "order commit outcome unknown; verified before anything else", append(messageFields(msg, d),
			logs.Event, logs.EventOrderCommitUnknown, "action", out.Action.String())...)
	}
	switch out.Action {
	case orderstore.Ack:
		c.meter.Observe(took)
		c.count(out)
		if out.Result == orderstore.ResultOrderCreated && !out.Redelivered {
			c.Metrics.ToOrder.Observe(time.Since(msg.ReservedAt).Seconds())
		}
		switch {
		case out.Redelivered || out.Result == orderstore.ResultDuplicate:
			c.Log.InfoContext(ctx, "duplicate delivery answered from the inbox", append(messageFields(msg, d),
				logs.Event, logs.EventOrderConsumerDuplicate, "result", out.Result)...)
		case c.Log.Enabled(ctx, slog.LevelDebug): // one line per message: debug
			c.Log.DebugContext(ctx, "order transaction committed", append(messageFields(msg, d),
				logs.Event, logs.EventOrderTransactionCommitted, "result", out.Result, logs.OrderID, out.OrderID, "reason", out.Reason)...)
		}
		c.acks.ack(ctx, d)
	case orderstore.Manual:
		if errors.Is(err, orderstore.ErrPayloadConflict) {
			c.Metrics.PayloadConflict.Inc()
		}
		c.Metrics.Consumed.WithLabelValues(orderstore.ResultManualReview).Inc()
		c.quarantine(ctx, d, &msg.MessageID, "CONFLICT", err.Error())
	default: // Retry: nothing committed or unknown; never compensated here.
		c.Metrics.Consumed.WithLabelValues("RETRY").Inc()
		if c.MaxAttempts > 0 && d.Attempt >= c.MaxAttempts {
			// The broker moves it to %DLQ%<group>; "seckill dlq-replay" brings it back.
			c.Metrics.DeadLettered.Inc()
			c.Log.ErrorContext(ctx, "last attempt failed; the message goes to the DLQ", append(append(messageFields(msg, d),
				"dlq", "%DLQ%"+c.Store.Group), logs.Err(err)...)...)
		} else {
			c.Log.WarnContext(ctx, "order transaction not committed; redelivery", append(messageFields(msg, d), logs.Err(err)...)...)
		}
		retryLater(c.MQ, d, time.Second, c.Log)
	}
}

// messageFields are the §12.1 fields of an order-create message.
func messageFields(msg events.OrderCreateRequested, d mq.Delivery) []any {
	return []any{logs.TraceID, msg.Trace.TraceID, logs.MessageID, msg.MessageID, logs.ReservationID, msg.ReservationID,
		logs.RequestID, msg.RequestID, logs.SKUID, msg.SKUID, logs.UserID, msg.UserID, logs.AttemptCount, d.Attempt}
}

// count records an acknowledged outcome in the design.md#metrics metrics.
func (c *OrderConsumer) count(out orderstore.Outcome) {
	if out.Redelivered {
		c.Metrics.Consumed.WithLabelValues(orderstore.ResultDuplicate).Inc()
		c.Metrics.Duplicates.Inc()
		return
	}
	c.Metrics.Consumed.WithLabelValues(out.Result).Inc()
	switch {
	case out.Result == orderstore.ResultDuplicate:
		c.Metrics.Duplicates.Inc()
	case out.Result == orderstore.ResultOrderRejected && out.Reason == orderstore.ReasonStockExhausted:
		c.Metrics.StockReject.Inc()
	case out.Result == orderstore.ResultOrderRejected && out.Reason == orderstore.ReasonAlreadyPurchased:
		c.Metrics.UserUnique.Inc()
	}
}

// heartbeats reports the measured commit rate and latency (design.md#backlog: the
// operator sizes the consumers from what PostgreSQL is seen to sustain).
func (c *OrderConsumer) heartbeats(ctx context.Context, every time.Duration) {
	c.meter.Take(time.Now())
	for idle(ctx, every) {
		h := c.meter.Take(time.Now())
		if err := control.ReportHeartbeat(ctx, c.Store.Pool, c.ID, "order-consumer", c.ActivityID, h, 0); err != nil {
			c.Log.Warn("heartbeat not reported", "error", err)
		}
	}
}

// quarantine keeps the message with its evidence, then acknowledges it: it
// is out of the retry loop, not a success.
func (c *OrderConsumer) quarantine(ctx context.Context, d mq.Delivery, id *uuid.UUID, reason, detail string) {
	if quarantine(ctx, c.MQ, c.Store.Pool, inbox.Quarantined{Group: c.Store.Group, MessageID: id, Reason: reason, Detail: detail}, d, c.Log) {
		c.Metrics.Quarantined.WithLabelValues(reason).Inc()
	}
}
