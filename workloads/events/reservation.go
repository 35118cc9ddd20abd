package events

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// NewOrderCreateRequested builds the order-create message of a reservation.
// The gateway's first send and every resend by the scanner build it from the
// same recorded fields, so its bytes — and the inbox's payload hash — never
// change: times are kept to the millisecond the reservation recorded, and
// retry_count stays 0 (attempts are transport metadata, design.md#messages).
func NewOrderCreateRequested(reservationID, messageID, requestID uuid.UUID, activityID, skuID, userID int64,
	bucket int, reservedAtMs, deadlineMs int64, traceID string) OrderCreateRequested {
	return OrderCreateRequested{SchemaVersion: 1, EventType: TypeOrderCreateRequested, MessageID: messageID,
		MessageKey: reservationID.String(), RequestID: requestID, ReservationID: reservationID,
		ActivityID: activityID, SKUID: skuID, UserID: userID, Bucket: bucket,
		ReservedAt: time.UnixMilli(reservedAtMs).UTC(), BusinessDeadline: time.UnixMilli(deadlineMs).UTC(),
		Trace: Trace{TraceID: traceID}}
}

// FromReservationHash rebuilds the order-create message from the Redis
// reservation hash written by reserve.lua (design.md#redis-keys recovery fields).
func FromReservationHash(h map[string]string) (OrderCreateRequested, error) {
	var m OrderCreateRequested
	ids := map[string]*uuid.UUID{}
	var rid, mid, req uuid.UUID
	ids["reservation_id"], ids["message_id"], ids["request_id"] = &rid, &mid, &req
	for k, p := range ids {
		v, err := uuid.Parse(h[k])
		if err != nil {
			return m, fmt.Errorf("reservation hash field %s: %w", k, err)
		}
		*p = v
	}
	ints := map[string]int64{}
	for _, k := range []string{"activity_id", "sku_id", "user_id", "bucket", "reserved_at_ms", "business_deadline_ms"} {
		v, err := strconv.ParseInt(h[k], 10, 64)
		if err != nil {
			return m, fmt.Errorf("reservation hash field %s: %w", k, err)
		}
		ints[k] = v
	}
	m = NewOrderCreateRequested(rid, mid, req, ints["activity_id"], ints["sku_id"], ints["user_id"],
		int(ints["bucket"]), ints["reserved_at_ms"], ints["business_deadline_ms"], h["trace_id"])
	m.Trace.SpanID = h["span_id"]
	return m, nil
}
