package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/states"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// Relay sends outbox events.
type Relay struct {
	Store    *outbox.Store
	Producer *mq.Producer
	Batch    int
	// Parallel is how many events of a claimed batch are in flight to the
	// broker at once (default 16): one send after another made the relay
	// the bottleneck of a backlog (a broker outage at 1,000 orders/s left
	// ~35k events that took minutes to drain).
	Parallel int
	Log      *slog.Logger
	Metrics  *metrics.Relay
	Health   *metrics.Health
	// Failpoint, when set, is called at after_outbox_send_before_mark (the
	// batch sent, not yet marked SENT: design.md#faults's relay crash); the
	// failpoints build exits the process there.
	Failpoint func(name string) error
}

// Run relays until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	if r.Metrics == nil {
		r.Metrics = metrics.NewRelay(prometheus.NewRegistry())
	}
	r.Health.Ready()
	for ctx.Err() == nil {
		r.Health.Beat()
		evs, err := r.Store.Claim(ctx, r.Batch)
		if err != nil {
			r.Log.Warn("claim failed", logs.Err(err)...)
			idle(ctx, time.Second)
			continue
		}
		if len(evs) == 0 {
			idle(ctx, 50*time.Millisecond)
			continue
		}
		if r.Log.Enabled(ctx, slog.LevelDebug) {
			r.Log.Debug("outbox events claimed", logs.Event, logs.EventOutboxClaimed, "events", len(evs))
		}
		r.relay(ctx, evs)
	}
	return nil
}

// relay sends a claimed batch, at most Parallel sends at a time, then marks
// the sent ones in one statement and each failed one for a retry. The
// events of one aggregate (one message key: an order's ORDER_CREATED, then
// its ORDER_PAID) go one after another in the order claimed, as before; only
// different aggregates overlap. A send whose outcome is unknown is retried
// with the same event id (the consumers' inbox makes the copies one).
func (r *Relay) relay(ctx context.Context, evs []outbox.Event) {
	parallel := r.Parallel
	if parallel < 1 {
		parallel = 16
	}
	var keys []string
	byKey := map[string][]int{}
	for i, e := range evs {
		if e.LeaseExpired {
			r.Metrics.LeaseExpired.Inc()
		}
		if _, seen := byKey[e.MessageKey]; !seen {
			keys = append(keys, e.MessageKey)
		}
		byKey[e.MessageKey] = append(byKey[e.MessageKey], i)
	}
	errs := make([]error, len(evs))
	ctxs := make([]context.Context, len(evs)) // each event's relay span
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, k := range keys {
		slots <- struct{}{}
		wg.Add(1)
		go func(idx []int) {
			defer func() { <-slots; wg.Done() }()
			for n, i := range idx {
				if n > 0 && errs[idx[n-1]] != nil {
					errs[i] = fmt.Errorf("not sent: the aggregate's earlier event failed: %w", errs[idx[n-1]])
					continue
				}
				e := evs[i]
				var span trace.Span
				ctxs[i], span = tracing.Start(tracing.FromTraceparent(ctx, e.Traceparent), tracing.SpanRelay, trace.SpanKindProducer,
					tracing.AttrEvent.String(e.EventType), tracing.AttrAttempt.Int(e.Attempt))
				m := mq.Message{Topic: e.Topic, MessageID: e.EventID.String(), Key: e.MessageKey, Tag: e.EventType, Body: e.Payload,
					Properties: tracing.Properties(ctxs[i])}
				if e.DeliverAt != nil {
					m.DeliverAt = *e.DeliverAt
				}
				sctx, cancel := context.WithTimeout(ctxs[i], 3*time.Second)
				_, errs[i] = r.Producer.Send(sctx, m)
				cancel()
				tracing.End(span, errs[i])
			}
		}(byKey[k])
	}
	wg.Wait()
	if r.Failpoint != nil {
		if err := r.Failpoint("after_outbox_send_before_mark"); err != nil {
			return // the leases run out; the events are sent again
		}
	}
	var sent []uuid.UUID
	for i, e := range evs {
		if errs[i] == nil {
			sent = append(sent, e.EventID)
			r.Metrics.Attempts.Observe(float64(e.Attempt))
			continue
		}
		// Not sent, or sent without an answer: the same id again later.
		if ctxs[i] == nil { // never tried: its aggregate's earlier event failed
			ctxs[i] = tracing.FromTraceparent(ctx, e.Traceparent)
		}
		r.Log.WarnContext(ctxs[i], "outbox send failed or unknown; sent again with the same id", append([]any{logs.Event, logs.EventOutboxSendUnknown,
			logs.OutboxEventID, e.EventID, logs.EventType, e.EventType, logs.AttemptCount, e.Attempt}, logs.Err(errs[i])...)...)
		status, rerr := r.Store.MarkRetry(ctx, e.EventID, e.Attempt, errs[i])
		if rerr != nil {
			r.Log.WarnContext(ctxs[i], "retry not recorded", append([]any{logs.OutboxEventID, e.EventID}, logs.Err(rerr)...)...)
			continue
		}
		r.Metrics.Sent.WithLabelValues(status).Inc()
		if status == string(states.OutboxManual) {
			r.Metrics.Manual.Inc()
			r.Log.ErrorContext(ctxs[i], "outbox event given up after the attempt cap; manual review", append([]any{logs.OutboxEventID, e.EventID,
				logs.EventType, e.EventType, logs.AttemptCount, e.Attempt}, logs.Err(errs[i])...)...)
		}
	}
	r.Metrics.Sent.WithLabelValues(string(states.OutboxSent)).Add(float64(len(sent)))
	n, err := r.Store.MarkSentMany(ctx, sent)
	switch {
	case err != nil:
		r.Log.Warn("sent but not marked; they will be sent again", append([]any{"events", len(sent)}, logs.Err(err)...)...)
	case n < int64(len(sent)):
		r.Log.Warn("sent, but some leases were lost meanwhile; their new owner sends them again", "events", len(sent), "marked", n)
	}
}
