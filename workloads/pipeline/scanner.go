package pipeline

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/lease"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/states"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// SendScanner resends reservations whose order-create message is not known
// to be sent (design.md#send): leased claims of due send_due entries, the
// original message id, backoff on failure, the entry removed only after a
// successful send.
type SendScanner struct {
	Redis    *redisstore.Store
	Producer *mq.Producer
	Topic    string
	Slots    []redisstore.Slot
	Lease    time.Duration
	Batch    int
	// ResendAfter: a sent reservation PostgreSQL has not decided after this
	// long is sent again (gateway.Config.ResendAfter); 0: never.
	ResendAfter time.Duration
	Log         *slog.Logger
	Metrics     *metrics.Scanner
	Health      *metrics.Health
}

// Run scans until ctx ends.
func (s *SendScanner) Run(ctx context.Context) error {
	if s.Metrics == nil {
		s.Metrics = metrics.NewScanner(prometheus.NewRegistry())
	}
	s.Health.Ready()
	for ctx.Err() == nil {
		s.Health.Beat()
		n := 0
		for _, sl := range s.Slots {
			n += s.scan(ctx, sl)
		}
		if n == 0 {
			idle(ctx, 200*time.Millisecond)
		}
	}
	return nil
}

func (s *SendScanner) scan(ctx context.Context, sl redisstore.Slot) int {
	claims, err := s.Redis.ClaimDue(ctx, sl, time.Now(), s.Lease, s.Batch)
	if err != nil {
		s.Log.Warn("claiming send_due failed", append([]any{"slot", sl.Tag()}, logs.Err(err)...)...)
		return 0
	}
	for _, c := range claims {
		h, err := s.Redis.Reservation(ctx, sl, c.ReservationID)
		if err != nil || h == nil {
			// Missing: evidence for the reconcile job; the entry stays.
			s.Log.Warn("send_due entry without reservation", append([]any{logs.ReservationID, c.ReservationID}, logs.Err(err)...)...)
			continue
		}
		if h.Status() != states.HashReserved {
			// Nothing left to send; an entry not removed comes back and is looked at again.
			if _, err := s.Redis.AckSend(ctx, sl, c.ReservationID, c.Lease, time.Now(), 0); err != nil {
				s.Log.Warn("send_due entry not removed", append([]any{logs.ReservationID, c.ReservationID}, logs.Err(err)...)...)
			}
			continue
		}
		msg, err := events.FromReservationHash(h)
		if err != nil {
			s.Log.Error("reservation hash unreadable", append([]any{logs.ReservationID, c.ReservationID}, logs.Err(err)...)...)
			continue
		}
		attempts, _ := strconv.Atoi(h["send_attempts"]) // absent before the first send: 0
		s.resend(ctx, sl, c, msg, attempts)
	}
	return len(claims)
}

// resend sends a claimed reservation's order-create message again, with
// its id, under a send span in the reservation's trace.
func (s *SendScanner) resend(ctx context.Context, sl redisstore.Slot, c redisstore.Claim, msg events.OrderCreateRequested, attempts int) {
	ctx, span := tracing.Start(tracing.FromTraceparent(ctx, msg.Trace.Traceparent()), tracing.SpanSend, trace.SpanKindProducer,
		tracing.AttrReservation.String(msg.ReservationID.String()), tracing.AttrMessage.String(msg.MessageID.String()),
		tracing.AttrAttempt.Int(attempts+1))
	var err error
	defer func() { tracing.End(span, err) }()
	// The body keeps the reservation's span, as the gateway sent it (the
	// same payload under the same id); the send span is the property.
	body, err := msg.Marshal()
	if err != nil {
		s.Log.ErrorContext(ctx, "order-create message not encoded", append([]any{logs.ReservationID, c.ReservationID}, logs.Err(err)...)...)
		return
	}
	fields := []any{logs.ReservationID, msg.ReservationID, logs.MessageID, msg.MessageID, logs.RequestID, msg.RequestID,
		logs.TraceID, msg.Trace.TraceID, logs.SKUID, msg.SKUID, logs.UserID, msg.UserID, logs.AttemptCount, attempts + 1}
	s.Log.InfoContext(ctx, "send claimed by the scanner: the same message id again", append(fields, logs.Event, logs.EventReservationResendClaimed)...)
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = s.Producer.Send(sctx, mq.Message{Topic: s.Topic, MessageID: msg.MessageID.String(),
		Key: msg.ReservationID.String(), Tag: events.TypeOrderCreateRequested, Body: body, Properties: tracing.Properties(ctx)})
	cancel()
	if err != nil {
		s.Metrics.Unknown.Inc()
		s.Log.WarnContext(ctx, "resend outcome unknown; rescheduled", append(append(fields, logs.Event, logs.EventReservationSendUnknown), logs.Err(err)...)...)
		next := time.Now().Add(lease.Backoff(attempts + 1))
		if _, rerr := s.Redis.RescheduleSend(ctx, sl, c.ReservationID, c.Lease, next, redisstore.MQUnknown, err.Error()); rerr != nil {
			// The lease runs out and the entry is claimed again.
			s.Log.WarnContext(ctx, "resend not rescheduled", append([]any{logs.ReservationID, c.ReservationID}, logs.Err(rerr)...)...)
		}
		return
	}
	s.Metrics.Resent.Inc()
	s.Metrics.Sends.Observe(float64(attempts + 1))
	if _, err := s.Redis.AckSend(ctx, sl, c.ReservationID, c.Lease, time.Now(), s.ResendAfter); err != nil {
		s.Log.WarnContext(ctx, "sent but not acked; it will be resent with the same id", append([]any{logs.ReservationID, c.ReservationID}, logs.Err(err)...)...)
	}
}
