package events

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func everyEvent() []Event {
	m := valid()
	m.Trace = Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	order := uuid.MustParse("019c8d22-7900-7000-8000-000000000001")
	pay := Payment{SchemaVersion: 1, EventType: TypeOrderPaid, OrderID: order, ReservationID: m.ReservationID, ActivityID: 1001, SKUID: 90001,
		PaymentID: uuid.MustParse("019c8d22-7a00-5000-8000-000000000002"), Provider: "sim", ProviderTransactionID: "tx-1",
		AmountCents: 100, Currency: "CNY", PaidAtMs: 1782360000123}
	refund := pay
	refund.EventType = TypeRefundRequired
	return []Event{NewOrderCreated(m, order), NewCompensateRequired(m, "SOLD_OUT"),
		NewOrderCancelled(order, m.ReservationID, 1001, 90001, 3), pay, refund}
}

// What a writer marshals, the reader parses back to the same value.
func TestEveryEventRoundTrips(t *testing.T) {
	for _, ev := range everyEvent() {
		t.Run(ev.Type(), func(t *testing.T) {
			raw, err := ev.Marshal()
			require.NoError(t, err)
			got, err := ParseEvent(raw)
			require.NoError(t, err)
			require.Equal(t, ev, got)
			require.Equal(t, ev.Reservation(), got.Reservation())
		})
	}
	timer := NewCancelTimer(uuid.MustParse("019c8d22-7900-7000-8000-000000000001"), 1001)
	raw, err := timer.Marshal()
	require.NoError(t, err)
	require.NotContains(t, string(raw), "expires_at_ms")
	got, err := ParseCancelTimer(raw)
	require.NoError(t, err)
	require.Equal(t, timer, got)
	// A timer the SQL of earlier releases wrote is still read.
	old := `{"schema_version":1,"event_type":"ORDER_CANCEL_TIMER","order_id":"019c8d22-7900-7000-8000-000000000001","activity_id":1001,"expires_at_ms":1782360000123}`
	got, err = ParseCancelTimer([]byte(old))
	require.NoError(t, err)
	require.Equal(t, int64(1782360000123), got.ExpiresAtMs)
}

func TestInvalidEvents(t *testing.T) {
	created, _ := everyEvent()[0].Marshal()
	rejected, _ := everyEvent()[1].Marshal()
	paid, _ := everyEvent()[3].Marshal()
	timer, _ := NewCancelTimer(uuid.New(), 7).Marshal()
	s := string(created)
	cases := map[string]struct {
		raw, reason string
		timer       bool
	}{
		"not json":           {raw: `{"schema_version":1,`, reason: ReasonMalformed},
		"oversized":          {raw: `{"pad":"` + strings.Repeat("x", MaxMessageBytes) + `"}`, reason: ReasonOversized},
		"future schema":      {raw: strings.Replace(s, `"schema_version":1`, `"schema_version":2`, 1), reason: ReasonUnknownSchema},
		"unknown type":       {raw: strings.Replace(s, TypeOrderCreated, "ORDER_SHIPPED", 1), reason: ReasonUnknownSchema},
		"unknown field":      {raw: strings.Replace(s, `"bucket"`, `"surprise":1,"bucket"`, 1), reason: ReasonMalformed},
		"a field of another": {raw: strings.Replace(s, `"bucket"`, `"reason":"SOLD_OUT","bucket"`, 1), reason: ReasonMalformed},
		"trailing":           {raw: s + `{}`, reason: ReasonMalformed},
		"no order id":        {raw: strings.Replace(s, `"order_id":"019c8d22-7900-7000-8000-000000000001"`, `"order_id":"00000000-0000-0000-0000-000000000000"`, 1), reason: ReasonInconsistent},
		"no reason":          {raw: strings.Replace(string(rejected), `"reason":"SOLD_OUT"`, `"reason":""`, 1), reason: ReasonInconsistent},
		"bad bucket":         {raw: strings.Replace(s, `"bucket":-1`, `"bucket":64`, 1), reason: ReasonInconsistent},
		"unpaid payment":     {raw: strings.Replace(string(paid), `"amount_cents":100`, `"amount_cents":0`, 1), reason: ReasonInconsistent},
		"timer as an event":  {raw: string(timer), reason: ReasonUnknownSchema},
		"event as a timer":   {raw: s, reason: ReasonUnknownSchema, timer: true},
		"timer without id":   {raw: strings.Replace(string(timer), `"order_id":"`, `"order_id":"x`, 1), reason: ReasonMalformed, timer: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			if c.timer {
				_, err = ParseCancelTimer([]byte(c.raw))
			} else {
				_, err = ParseEvent([]byte(c.raw))
			}
			var ie *InvalidError
			require.True(t, errors.As(err, &ie), "%v", err)
			require.Equal(t, c.reason, ie.Reason, err.Error())
		})
	}
}

func FuzzParseEvent(f *testing.F) {
	for _, ev := range everyEvent() {
		raw, _ := ev.Marshal()
		f.Add(raw)
	}
	f.Add([]byte(`{"schema_version":1,"event_type":"ORDER_CREATED"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := ParseEvent(raw)
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalid), "every refusal is a classified invalid message: %v", err)
			return
		}
		// Whatever is accepted names its reservation and encodes again.
		require.NotEqual(t, uuid.Nil, ev.Reservation())
		_, err = ev.Marshal()
		require.NoError(t, err)
	})
}
