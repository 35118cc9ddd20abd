// Package events defines the messages on the topics (design.md#messages) and parses
// them strictly: a message that does not parse, names an unknown schema or
// contradicts itself is an error that the consumer quarantines, never a
// message to guess at.
package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill-operator/workloads/tracing"
)

// TypeOrderCreateRequested is the order-create message (the create topic);
// the outbox's events are in order.go.
const TypeOrderCreateRequested = "ORDER_CREATE_REQUESTED"

// MaxMessageBytes bounds a message body; larger ones are refused unread.
const MaxMessageBytes = 16 << 10

// Trace carries the trace context through the pipeline: the reservation's
// (reserve) span, the same in every send of a message id — the gateway's and
// the scanner's, rebuilt from Redis — since the inbox compares the bodies'
// hashes. Each send's own span rides in the message's traceparent property.
type Trace struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

// Traceparent is the W3C header of the span the fields name ("" unless
// both are valid ids): the consumer's parent when the message's
// traceparent property is absent.
func (t Trace) Traceparent() string { return tracing.Compose(t.TraceID, t.SpanID) }

// OrderCreateRequested is the order-create message (schema version 1).
type OrderCreateRequested struct {
	SchemaVersion    int        `json:"schema_version"`
	EventType        string     `json:"event_type"`
	MessageID        uuid.UUID  `json:"message_id"`
	MessageKey       string     `json:"message_key"`
	RequestID        uuid.UUID  `json:"request_id"`
	ReservationID    uuid.UUID  `json:"reservation_id"`
	ActivityID       int64      `json:"activity_id"`
	SKUID            int64      `json:"sku_id"`
	UserID           int64      `json:"user_id"`
	Bucket           int        `json:"bucket"`
	OrderID          *uuid.UUID `json:"order_id,omitempty"`
	ReservedAt       time.Time  `json:"reserved_at"`
	BusinessDeadline time.Time  `json:"business_deadline"`
	RetryCount       int        `json:"retry_count"`
	Trace            Trace      `json:"trace"`
}

// ErrInvalid marks a message that must be quarantined.
var ErrInvalid = errors.New("invalid message")

// Reason codes of invalid messages (stored with the quarantined message).
const (
	ReasonMalformed     = "MALFORMED"
	ReasonOversized     = "OVERSIZED"
	ReasonUnknownSchema = "UNKNOWN_SCHEMA"
	ReasonInconsistent  = "INCONSISTENT"
)

// InvalidError says why a message is invalid.
type InvalidError struct {
	Reason string
	Detail string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrInvalid, e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// ReasonOf is the quarantine reason of err: an *InvalidError's, else
// MALFORMED.
func ReasonOf(err error) string {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return ReasonMalformed
}

func invalid(reason, format string, args ...any) error {
	return &InvalidError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// ParseOrderCreateRequested parses and validates an order-create message.
func ParseOrderCreateRequested(raw []byte) (OrderCreateRequested, error) {
	typ, err := peek(raw)
	if err != nil {
		return OrderCreateRequested{}, err
	}
	if typ != TypeOrderCreateRequested {
		return OrderCreateRequested{}, invalid(ReasonUnknownSchema, "schema_version 1, event_type %q", typ)
	}
	m, err := decodeAs[OrderCreateRequested](raw)
	if err != nil {
		return m, err
	}
	switch {
	case m.MessageID == uuid.Nil || m.ReservationID == uuid.Nil || m.RequestID == uuid.Nil:
		return m, invalid(ReasonInconsistent, "message_id, reservation_id and request_id are required")
	case m.MessageKey != m.ReservationID.String():
		return m, invalid(ReasonInconsistent, "message_key %q is not the reservation id", m.MessageKey)
	case m.ActivityID <= 0 || m.SKUID <= 0 || m.UserID <= 0:
		return m, invalid(ReasonInconsistent, "activity_id, sku_id and user_id must be positive")
	case m.Bucket < -1 || m.Bucket > 63:
		return m, invalid(ReasonInconsistent, "bucket %d out of range", m.Bucket)
	case m.OrderID != nil:
		return m, invalid(ReasonInconsistent, "an order-create request carries no order_id")
	case m.ReservedAt.IsZero() || m.BusinessDeadline.IsZero() || !m.BusinessDeadline.After(m.ReservedAt):
		return m, invalid(ReasonInconsistent, "business_deadline must be after reserved_at")
	case m.RetryCount < 0:
		return m, invalid(ReasonInconsistent, "retry_count is negative")
	}
	return m, nil
}

// Marshal encodes a message; it is what the gateway and the scanner send.
func (m OrderCreateRequested) Marshal() ([]byte, error) {
	return json.Marshal(m)
}
