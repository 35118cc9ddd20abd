package events

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func valid() OrderCreateRequested {
	rid := uuid.MustParse("019c8d22-7700-82af-a910-a2a167416d6c")
	at := time.Date(2026, 6, 25, 9, 0, 0, 123e6, time.UTC)
	return OrderCreateRequested{SchemaVersion: 1, EventType: TypeOrderCreateRequested,
		MessageID: uuid.MustParse("019c8d22-7800-8a20-b125-36f04f69dc11"), MessageKey: rid.String(),
		RequestID: uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b"), ReservationID: rid,
		ActivityID: 1001, SKUID: 90001, UserID: 80000001, Bucket: -1, ReservedAt: at, BusinessDeadline: at.Add(5 * time.Minute)}
}

func TestRoundTrip(t *testing.T) {
	raw, err := valid().Marshal()
	require.NoError(t, err)
	got, err := ParseOrderCreateRequested(raw)
	require.NoError(t, err)
	require.Equal(t, valid(), got)
}

func TestInvalidMessages(t *testing.T) {
	good, _ := valid().Marshal()
	mut := func(f func(m *OrderCreateRequested)) string {
		m := valid()
		f(&m)
		b, _ := m.Marshal()
		return string(b)
	}
	cases := map[string]struct{ raw, reason string }{
		"not json":        {`{"schema_version":1,`, ReasonMalformed},
		"empty":           {``, ReasonMalformed},
		"oversized":       {`{"pad":"` + strings.Repeat("x", MaxMessageBytes) + `"}`, ReasonOversized},
		"future schema":   {strings.Replace(string(good), `"schema_version":1`, `"schema_version":2`, 1), ReasonUnknownSchema},
		"no schema":       {`{"event_type":"ORDER_CREATE_REQUESTED"}`, ReasonUnknownSchema},
		"other event":     {strings.Replace(string(good), TypeOrderCreateRequested, "ORDER_PAID", 1), ReasonUnknownSchema},
		"unknown field":   {strings.Replace(string(good), `"retry_count"`, `"surprise":1,"retry_count"`, 1), ReasonMalformed},
		"wrong type":      {strings.Replace(string(good), `"user_id":80000001`, `"user_id":"80000001"`, 1), ReasonMalformed},
		"trailing":        {string(good) + `{}`, ReasonMalformed},
		"key mismatch":    {mut(func(m *OrderCreateRequested) { m.MessageKey = "x" }), ReasonInconsistent},
		"nil reservation": {mut(func(m *OrderCreateRequested) { m.ReservationID = uuid.Nil; m.MessageKey = uuid.Nil.String() }), ReasonInconsistent},
		"zero user":       {mut(func(m *OrderCreateRequested) { m.UserID = 0 }), ReasonInconsistent},
		"deadline first":  {mut(func(m *OrderCreateRequested) { m.BusinessDeadline = m.ReservedAt }), ReasonInconsistent},
		"has order id":    {mut(func(m *OrderCreateRequested) { id := uuid.New(); m.OrderID = &id }), ReasonInconsistent},
		"bad bucket":      {mut(func(m *OrderCreateRequested) { m.Bucket = 64 }), ReasonInconsistent},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseOrderCreateRequested([]byte(c.raw))
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalid))
			var ie *InvalidError
			require.True(t, errors.As(err, &ie))
			require.Equal(t, c.reason, ie.Reason, err.Error())
		})
	}
}

func FuzzParseOrderCreateRequested(f *testing.F) {
	good, _ := valid().Marshal()
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schema_version":1,"event_type":"ORDER_CREATE_REQUESTED"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseOrderCreateRequested(raw)
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalid), "every refusal is a classified invalid message: %v", err)
			return
		}
		// Whatever is accepted is self-consistent.
		require.Equal(t, m.ReservationID.String(), m.MessageKey)
		require.True(t, m.BusinessDeadline.After(m.ReservedAt))
	})
}

func TestFromReservationHashMatchesTheFirstSend(t *testing.T) {
	rid, mid, req := uuid.New(), uuid.New(), uuid.New()
	first := NewOrderCreateRequested(rid, mid, req, 1001, 90001, 7, 2, 1782360000123, 1782360300123, "tr")
	h := map[string]string{"reservation_id": rid.String(), "message_id": mid.String(), "request_id": req.String(),
		"activity_id": "1001", "sku_id": "90001", "user_id": "7", "bucket": "2",
		"reserved_at_ms": "1782360000123", "business_deadline_ms": "1782360300123", "trace_id": "tr"}
	again, err := FromReservationHash(h)
	require.NoError(t, err)
	a, _ := first.Marshal()
	b, _ := again.Marshal()
	require.Equal(t, string(a), string(b), "a resend is byte-identical, so its payload hash matches")
	_, err = ParseOrderCreateRequested(a)
	require.NoError(t, err)
	h["user_id"] = "x"
	_, err = FromReservationHash(h)
	require.Error(t, err)
}
