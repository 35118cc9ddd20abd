// Package logs is the one logger of the operator and every workload
// (design.md#metrics, the specification's §12.1): JSON lines through
// log/slog, the field names of §12.1, its event names as an "event" field,
// and errors classified into "error_class" so that a person or an alert
// can group them without parsing messages. The operator logs through the
// same handler (logr's slog bridge), so one query reads both.
package logs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// The fields of §12.1. High-cardinality: never a metric label.
const (
	TraceID = "trace_id"
	// SpanID is the span of the line's step (with TraceID, from the
	// context's span: design.md#traces).
	SpanID            = "span_id"
	RequestID         = "request_id"
	ReservationID     = "reservation_id"
	MessageID         = "message_id"
	OrderID           = "order_id"
	PaymentID         = "payment_id"
	ActivityID        = "activity_id"
	SKUID             = "sku_id"
	UserID            = "user_id"
	EventType         = "event_type"
	ConsumerGroup     = "consumer_group"
	ReservationStatus = "reservation_status"
	OrderStatus       = "order_status"
	CompensationID    = "compensation_id"
	OutboxEventID     = "outbox_event_id"
	AttemptCount      = "attempt_count"
	ErrorClassKey     = "error_class"
	// Event names the line (one of the Event* values).
	Event = "event"
	// Workload is the process's role (gateway, consumer, operator, ...).
	Workload = "workload"
)

// The events of §12.1.
const (
	EventReservationCreated        = "reservation.created"
	EventReservationSendStarted    = "reservation.mq_send_started"
	EventReservationSendUnknown    = "reservation.mq_send_unknown"
	EventReservationResendClaimed  = "reservation.mq_resend_claimed"
	EventOrderConsumerDuplicate    = "order.consumer_duplicate"
	EventOrderTransactionCommitted = "order.transaction_committed"
	EventOrderCommitUnknown        = "order.commit_unknown"
	EventOutboxClaimed             = "outbox.claimed"
	EventOutboxSendUnknown         = "outbox.send_unknown"
	EventCompensationAuthorized    = "compensation.authorized"
	EventCompensationRedisApplied  = "compensation.redis_applied"
	EventCompensationAlready       = "compensation.already_applied"
	EventCompensationRedisMissing  = "compensation.redis_missing"
	EventReconcileAnomaly          = "reconcile.anomaly_detected"
	EventReconcileRepairCreated    = "reconcile.repair_created"
	EventPaymentCancelRace         = "payment.cancel_race_detected"
)

// Events lists every event of §12.1.
var Events = []string{EventReservationCreated, EventReservationSendStarted, EventReservationSendUnknown, EventReservationResendClaimed,
	EventOrderConsumerDuplicate, EventOrderTransactionCommitted, EventOrderCommitUnknown, EventOutboxClaimed, EventOutboxSendUnknown,
	EventCompensationAuthorized, EventCompensationRedisApplied, EventCompensationAlready, EventCompensationRedisMissing,
	EventReconcileAnomaly, EventReconcileRepairCreated, EventPaymentCancelRace}

// Options configure New.
type Options struct {
	// Level is the lowest level written (default Info; the per-message
	// events of a sale's hot path are Debug).
	Level slog.Leveler
	// ActivityID, when positive, is on every line.
	ActivityID int64
}

// New is a JSON logger for one workload writing to w (nil: stderr).
func New(w io.Writer, workload string, o Options) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	l := slog.New(traced{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: o.Level})}).With(Workload, workload)
	if o.ActivityID > 0 {
		l = l.With(ActivityID, o.ActivityID)
	}
	return l
}

// ParseLevel reads a -log-level flag: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

// Err is the attributes of an error on a log line: the error and its class.
func Err(err error) []any {
	return []any{"error", err, ErrorClassKey, ErrorClass(err)}
}

// Error classes.
const (
	ClassTimeout    = "timeout"
	ClassCanceled   = "canceled"
	ClassConnection = "connection"
	ClassConflict   = "conflict"
	ClassConstraint = "constraint"
	ClassPermission = "permission"
	ClassNotFound   = "not_found"
	ClassBroker     = "broker"
	ClassInvalid    = "invalid"
	ClassOther      = "other"
)

// ErrorClass sorts an error into a small, fixed set of classes.
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "23505":
			return ClassConflict // serialization, deadlock, unique
		case strings.HasPrefix(pgErr.Code, "23"):
			return ClassConstraint
		case pgErr.Code == "42501" || pgErr.Code == "28P01" || pgErr.Code == "28000":
			return ClassPermission
		case strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P"):
			return ClassConnection // connection exceptions, admin shutdown
		case strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "42"):
			return ClassInvalid
		}
		return ClassOther
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, redis.Nil):
		return ClassNotFound
	case pgconn.SafeToRetry(err), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.As(err, &netErr):
		return ClassConnection
	case isBroker(err):
		return ClassBroker
	}
	var numErr *strconv.NumError
	if errors.As(err, &numErr) {
		return ClassInvalid
	}
	return ClassOther
}

// isBroker: the RocketMQ client's answers name their CODE.
func isBroker(err error) bool {
	s := err.Error()
	return strings.Contains(s, "CODE: ") || strings.Contains(s, "rocketmq")
}

// traced puts the trace and span ids of the context's span on every line
// logged with a context (InfoContext, …) inside a traced step
// (design.md#traces), unless the line names a trace id itself (an empty
// trace_id field gives way to the span's).
type traced struct{ slog.Handler }

func (h traced) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.Handler.Handle(ctx, r)
	}
	named, empty := false, false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == TraceID {
			v := a.Value.String()
			named, empty = v != "", v == ""
		}
		return !named
	})
	if named {
		return h.Handler.Handle(ctx, r)
	}
	if empty { // a copy without the empty field
		c := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != TraceID {
				c.AddAttrs(a)
			}
			return true
		})
		r = c
	}
	r.AddAttrs(slog.String(TraceID, sc.TraceID().String()), slog.String(SpanID, sc.SpanID().String()))
	return h.Handler.Handle(ctx, r)
}

func (h traced) WithAttrs(as []slog.Attr) slog.Handler { return traced{h.Handler.WithAttrs(as)} }
func (h traced) WithGroup(name string) slog.Handler    { return traced{h.Handler.WithGroup(name)} }
