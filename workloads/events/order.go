package events

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// The events the order side writes to the outbox (event_outbox.payload)
// and the relay publishes: one struct per type, written with Marshal and
// read with ParseEvent (or ParseCancelTimer), so that the writer and the
// reader share one definition. All are schema version 1.
const (
	// TypeOrderCreated: an order was created for a reservation (events
	// topic; the projector marks the Redis reservation ORDER_CREATED).
	TypeOrderCreated = "ORDER_CREATED"
	// TypeCompensateRequired: PostgreSQL refused a reservation (events
	// topic; the projector shows the refusal, the compensator gives the
	// Redis unit back).
	TypeCompensateRequired = "RESERVATION_COMPENSATE_REQUIRED"
	// TypeOrderCancelled: an unpaid order was cancelled and its unit
	// released in PostgreSQL (events topic; the projector releases Redis).
	TypeOrderCancelled = "ORDER_CANCELLED"
	// TypeOrderPaid and TypeRefundRequired: a payment was recorded, on a
	// payable order or on a cancelled one (events topic; for downstream
	// systems, the projector ignores them).
	TypeOrderPaid      = "ORDER_PAID"
	TypeRefundRequired = "PAYMENT_REFUND_REQUIRED"
	// TypeOrderCancelTimer: the order's timeout-cancel timer, a delayed
	// message due when its payment window ends (cancel topic).
	TypeOrderCancelTimer = "ORDER_CANCEL_TIMER"
)

// Event is any of the order side's events.
type Event interface {
	// Type is the event_type.
	Type() string
	// Reservation is the reservation the event is about.
	Reservation() uuid.UUID
	// Marshal encodes it (what the outbox stores).
	Marshal() ([]byte, error)
	validate() error
}

// OrderCreated is ORDER_CREATED.
type OrderCreated struct {
	SchemaVersion int       `json:"schema_version"`
	EventType     string    `json:"event_type"`
	OrderID       uuid.UUID `json:"order_id"`
	ReservationID uuid.UUID `json:"reservation_id"`
	ActivityID    int64     `json:"activity_id"`
	SKUID         int64     `json:"sku_id"`
	UserID        int64     `json:"user_id"`
	Bucket        int       `json:"bucket"`
	Trace         Trace     `json:"trace"`
}

// NewOrderCreated is the event of the order made for m.
func NewOrderCreated(m OrderCreateRequested, orderID uuid.UUID) OrderCreated {
	return OrderCreated{SchemaVersion: 1, EventType: TypeOrderCreated, OrderID: orderID, ReservationID: m.ReservationID,
		ActivityID: m.ActivityID, SKUID: m.SKUID, UserID: m.UserID, Bucket: m.Bucket, Trace: m.Trace}
}

func (e OrderCreated) Type() string             { return e.EventType }
func (e OrderCreated) Reservation() uuid.UUID   { return e.ReservationID }
func (e OrderCreated) Marshal() ([]byte, error) { return marshal(e) }
func (e OrderCreated) validate() error {
	return firstOf(ids(e.OrderID, e.ReservationID), where(e.ActivityID, e.SKUID, e.UserID, e.Bucket))
}

// CompensateRequired is RESERVATION_COMPENSATE_REQUIRED: PostgreSQL
// refused the reservation for Reason (SOLD_OUT, DUPLICATE_USER, LATE, …).
type CompensateRequired struct {
	SchemaVersion int       `json:"schema_version"`
	EventType     string    `json:"event_type"`
	ReservationID uuid.UUID `json:"reservation_id"`
	ActivityID    int64     `json:"activity_id"`
	SKUID         int64     `json:"sku_id"`
	UserID        int64     `json:"user_id"`
	Bucket        int       `json:"bucket"`
	Reason        string    `json:"reason"`
	Trace         Trace     `json:"trace"`
}

// NewCompensateRequired is the event of m refused for reason.
func NewCompensateRequired(m OrderCreateRequested, reason string) CompensateRequired {
	return CompensateRequired{SchemaVersion: 1, EventType: TypeCompensateRequired, ReservationID: m.ReservationID,
		ActivityID: m.ActivityID, SKUID: m.SKUID, UserID: m.UserID, Bucket: m.Bucket, Reason: reason, Trace: m.Trace}
}

func (e CompensateRequired) Type() string             { return e.EventType }
func (e CompensateRequired) Reservation() uuid.UUID   { return e.ReservationID }
func (e CompensateRequired) Marshal() ([]byte, error) { return marshal(e) }
func (e CompensateRequired) validate() error {
	if e.Reason == "" {
		return invalid(ReasonInconsistent, "a refusal names its reason")
	}
	return firstOf(ids(e.ReservationID), where(e.ActivityID, e.SKUID, e.UserID, e.Bucket))
}

// OrderCancelled is ORDER_CANCELLED.
type OrderCancelled struct {
	SchemaVersion int       `json:"schema_version"`
	EventType     string    `json:"event_type"`
	OrderID       uuid.UUID `json:"order_id"`
	ReservationID uuid.UUID `json:"reservation_id"`
	ActivityID    int64     `json:"activity_id"`
	SKUID         int64     `json:"sku_id"`
	Bucket        int       `json:"bucket"`
}

// NewOrderCancelled is the event of a cancelled order.
func NewOrderCancelled(orderID, reservationID uuid.UUID, activityID, skuID int64, bucket int) OrderCancelled {
	return OrderCancelled{SchemaVersion: 1, EventType: TypeOrderCancelled, OrderID: orderID, ReservationID: reservationID,
		ActivityID: activityID, SKUID: skuID, Bucket: bucket}
}

func (e OrderCancelled) Type() string             { return e.EventType }
func (e OrderCancelled) Reservation() uuid.UUID   { return e.ReservationID }
func (e OrderCancelled) Marshal() ([]byte, error) { return marshal(e) }
func (e OrderCancelled) validate() error {
	return firstOf(ids(e.OrderID, e.ReservationID), where(e.ActivityID, e.SKUID, 1, e.Bucket))
}

// Payment is ORDER_PAID or PAYMENT_REFUND_REQUIRED: a payment recorded on
// an order (EventType tells which).
type Payment struct {
	SchemaVersion         int       `json:"schema_version"`
	EventType             string    `json:"event_type"`
	OrderID               uuid.UUID `json:"order_id"`
	ReservationID         uuid.UUID `json:"reservation_id"`
	ActivityID            int64     `json:"activity_id"`
	SKUID                 int64     `json:"sku_id"`
	PaymentID             uuid.UUID `json:"payment_id"`
	Provider              string    `json:"provider"`
	ProviderTransactionID string    `json:"provider_transaction_id"`
	AmountCents           int64     `json:"amount_cents"`
	Currency              string    `json:"currency"`
	PaidAtMs              int64     `json:"paid_at_ms"`
}

func (e Payment) Type() string             { return e.EventType }
func (e Payment) Reservation() uuid.UUID   { return e.ReservationID }
func (e Payment) Marshal() ([]byte, error) { return marshal(e) }
func (e Payment) validate() error {
	switch {
	case e.Provider == "" || e.ProviderTransactionID == "":
		return invalid(ReasonInconsistent, "provider and provider_transaction_id are required")
	case e.AmountCents <= 0 || len(e.Currency) != 3:
		return invalid(ReasonInconsistent, "amount_cents %d, currency %q", e.AmountCents, e.Currency)
	case e.PaidAtMs <= 0:
		return invalid(ReasonInconsistent, "paid_at_ms is required")
	}
	return firstOf(ids(e.OrderID, e.ReservationID, e.PaymentID), where(e.ActivityID, e.SKUID, 1, -1))
}

// CancelTimer is ORDER_CANCEL_TIMER. The canceller decides from the order
// in PostgreSQL, not from the timer: expires_at_ms is informational (timers
// written by SQL before this catalogue carry it; new ones leave it out).
type CancelTimer struct {
	SchemaVersion int       `json:"schema_version"`
	EventType     string    `json:"event_type"`
	OrderID       uuid.UUID `json:"order_id"`
	ActivityID    int64     `json:"activity_id"`
	ExpiresAtMs   int64     `json:"expires_at_ms,omitempty"`
}

// NewCancelTimer is the timer of an order.
func NewCancelTimer(orderID uuid.UUID, activityID int64) CancelTimer {
	return CancelTimer{SchemaVersion: 1, EventType: TypeOrderCancelTimer, OrderID: orderID, ActivityID: activityID}
}

func (e CancelTimer) Type() string             { return e.EventType }
func (e CancelTimer) Reservation() uuid.UUID   { return uuid.Nil }
func (e CancelTimer) Marshal() ([]byte, error) { return marshal(e) }
func (e CancelTimer) validate() error {
	return firstOf(ids(e.OrderID), where(e.ActivityID, 1, 1, -1))
}

// ParseEvent reads an event of the events topic: schema 1, a known type,
// no unknown field, consistent. Any other body is an *InvalidError.
func ParseEvent(raw []byte) (Event, error) {
	typ, err := peek(raw)
	if err != nil {
		return nil, err
	}
	var ev Event
	switch typ {
	case TypeOrderCreated:
		ev, err = decodeAs[OrderCreated](raw)
	case TypeCompensateRequired:
		ev, err = decodeAs[CompensateRequired](raw)
	case TypeOrderCancelled:
		ev, err = decodeAs[OrderCancelled](raw)
	case TypeOrderPaid, TypeRefundRequired:
		ev, err = decodeAs[Payment](raw)
	default:
		return nil, invalid(ReasonUnknownSchema, "event_type %q", typ)
	}
	if err != nil {
		return nil, err
	}
	return ev, ev.validate()
}

// ParseCancelTimer reads a timer of the cancel topic.
func ParseCancelTimer(raw []byte) (CancelTimer, error) {
	typ, err := peek(raw)
	if err != nil {
		return CancelTimer{}, err
	}
	if typ != TypeOrderCancelTimer {
		return CancelTimer{}, invalid(ReasonUnknownSchema, "event_type %q on the cancel topic", typ)
	}
	t, err := decodeAs[CancelTimer](raw)
	if err != nil {
		return t, err
	}
	return t, t.validate()
}

// peek checks the size and the schema version and returns the event type,
// so that a future schema is reported as such, not as a field mismatch.
func peek(raw []byte) (string, error) {
	if len(raw) > MaxMessageBytes {
		return "", invalid(ReasonOversized, "%d bytes, limit %d", len(raw), MaxMessageBytes)
	}
	var head struct {
		SchemaVersion *int   `json:"schema_version"`
		EventType     string `json:"event_type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", invalid(ReasonMalformed, "%v", err)
	}
	if head.SchemaVersion == nil || *head.SchemaVersion != 1 {
		v := "missing"
		if head.SchemaVersion != nil {
			v = fmt.Sprint(*head.SchemaVersion)
		}
		return "", invalid(ReasonUnknownSchema, "schema_version %s, event_type %q", v, head.EventType)
	}
	return head.EventType, nil
}

// decodeAs decodes raw strictly: no unknown field, nothing after it.
func decodeAs[T any](raw []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, invalid(ReasonMalformed, "%v", err)
	}
	if dec.More() {
		return v, invalid(ReasonMalformed, "trailing data after the message")
	}
	return v, nil
}

func marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	return b, nil
}

func ids(list ...uuid.UUID) error {
	for _, id := range list {
		if id == uuid.Nil {
			return invalid(ReasonInconsistent, "an id is missing")
		}
	}
	return nil
}

func where(activity, sku, user int64, bucket int) error {
	switch {
	case activity <= 0 || sku <= 0 || user <= 0:
		return invalid(ReasonInconsistent, "activity_id, sku_id and user_id must be positive")
	case bucket < -1 || bucket > 63:
		return invalid(ReasonInconsistent, "bucket %d out of range", bucket)
	}
	return nil
}

func firstOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
