package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/cancel"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/inbox"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// Canceller runs the timeout-cancel timers (delayed messages due at each
// order's expires_at).
type Canceller struct {
	MQ        *mq.Consumer
	Cancel    *cancel.Canceller
	Group     string
	Invisible time.Duration
	Log       *slog.Logger
	Health    *metrics.Health
	// RefundEvery is the period of the refund sweep (0: none).
	RefundEvery time.Duration
	// RearmAfter is the delivery attempt from which a paused or frozen
	// timer is written again as a new message instead of redelivered
	// (default 4; keep it below the group's retry limit).
	RearmAfter int
}

func (c *Canceller) rearmAfter() int {
	if c.RearmAfter > 0 {
		return c.RearmAfter
	}
	return 4
}

// Run cancels until ctx ends; every RefundEvery it also refunds the
// payments reported after a cancellation.
func (c *Canceller) Run(ctx context.Context) error {
	if c.RefundEvery > 0 && c.Cancel.Payments != nil {
		go func() {
			for idle(ctx, c.RefundEvery) {
				if n, err := c.Cancel.Payments.Refund(ctx, c.Cancel.Channel, 100); err != nil {
					c.Log.Warn("refunds not run", "error", err)
				} else if n > 0 {
					c.Log.Info("refunded payments of cancelled orders", "count", n)
				}
			}
		}()
	}
	receiveLoop(ctx, c.MQ, c.Invisible, c.Health, c.Log, c.handle)
	return nil
}

func (c *Canceller) handle(ctx context.Context, d mq.Delivery) {
	// The cancel span is in the order's trace (the timer's relay span is
	// its parent); the ORDER_CANCELLED event it writes carries it.
	ctx, span := tracing.Start(tracing.FromProperties(ctx, d.Properties, ""), tracing.SpanCancel, trace.SpanKindConsumer,
		tracing.AttrAttempt.Int(d.Attempt))
	tm, err := events.ParseCancelTimer(d.Body)
	var out cancel.Outcome
	if err == nil {
		span.SetAttributes(tracing.AttrOrder.String(tm.OrderID.String()))
		out, err = c.Cancel.Handle(ctx, tm.OrderID)
	}
	span.SetAttributes(tracing.AttrResult.String(out.Result))
	defer func() { tracing.End(span, err) }()
	if err != nil && (errors.Is(err, cancel.ErrNoOrder) || errors.Is(err, events.ErrInvalid)) {
		quarantine(ctx, c.MQ, c.Cancel.Pool, inbox.Quarantined{Group: c.Group, Reason: events.ReasonOf(err), Detail: err.Error()}, d, c.Log)
		return
	}
	if err != nil && errors.Is(err, payment.ErrConflict) {
		// The channel reports a payment that contradicts what is recorded
		// (its transaction belongs to another order): no automatic decision.
		// The order stays CANCEL_PENDING, the timer is kept as evidence.
		c.Log.ErrorContext(ctx, "cancel timer: the channel's payment conflicts; quarantined for review", append([]any{logs.OrderID, tm.OrderID}, logs.Err(err)...)...)
		quarantine(ctx, c.MQ, c.Cancel.Pool, inbox.Quarantined{Group: c.Group, Reason: events.ReasonInconsistent, Detail: err.Error()}, d, c.Log)
		return
	}
	if err != nil {
		c.Log.WarnContext(ctx, "cancel timer failed; redelivery", append([]any{logs.OrderID, tm.OrderID}, logs.Err(err)...)...)
		retryLater(c.MQ, d, 5*time.Second, c.Log)
		return
	}
	switch out.Result {
	case cancel.Paused, cancel.Frozen, cancel.Early, cancel.Unknown:
		long := out.Result == cancel.Paused || out.Result == cancel.Frozen
		if long && d.Attempt >= c.rearmAfter() {
			// A long wait: every redelivery counts against the group's
			// limit, so the timer is written again as a new message and
			// this one acknowledged (never dead-lettered by waiting).
			id := d.MessageID
			if id == "" {
				id = d.BrokerID
			}
			if _, err := c.Cancel.Rearm(ctx, id, d.Topic, tm.OrderID, out.RetryAt); err != nil {
				c.Log.WarnContext(ctx, "cancel timer not re-armed; redelivery", "order_id", tm.OrderID, "error", err)
				retryLater(c.MQ, d, 5*time.Second, c.Log)
				return
			}
			ackDone(ctx, c.MQ, d, c.Log)
			return
		}
		// Not now: the same timer comes back later (bounded wait).
		retryLater(c.MQ, d, min(max(time.Until(out.RetryAt), time.Second), 10*time.Minute), c.Log)
	default:
		if out.Result == cancel.PaidInstead {
			// The payment and the cancel met: the channel's success wins.
			c.Log.WarnContext(ctx, "cancel timer met a successful payment: applied as paid", logs.Event, logs.EventPaymentCancelRace,
				logs.OrderID, tm.OrderID, "result", out.Result)
		} else {
			c.Log.InfoContext(ctx, "cancel timer", logs.OrderID, tm.OrderID, "result", out.Result)
		}
		ackDone(ctx, c.MQ, d, c.Log)
	}
}
