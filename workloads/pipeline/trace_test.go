package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

// spansOf indexes the recorded spans of one trace by name and, for the
// outbox's and the projection's, by the event they carried.
type spansOf struct {
	t     *testing.T
	spans tracetest.SpanStubs
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}

// one is the single span of trace named name (with event, when given).
func (o spansOf) one(name, event string) tracetest.SpanStub {
	o.t.Helper()
	var found []tracetest.SpanStub
	for _, s := range o.spans {
		if s.Name == name && (event == "" || attr(s, tracing.AttrEvent) == event) {
			found = append(found, s)
		}
	}
	require.Len(o.t, found, 1, "spans %s %s in the trace: %v", name, event, o.names())
	return found[0]
}

func (o spansOf) names() []string {
	var n []string
	for _, s := range o.spans {
		n = append(n, s.Name+"/"+attr(s, tracing.AttrEvent))
	}
	return n
}

// childOf requires child's parent to be parent.
func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	require.Equal(t, parent.SpanContext.SpanID(), child.Parent.SpanID(), "%s's parent is %s", child.Name, parent.Name)
	require.Equal(t, parent.SpanContext.TraceID(), child.SpanContext.TraceID())
}

// One trace per reservation (design.md#traces): buyers reserve through the
// real gateway (one with its own traceparent), the order consumer takes
// them in batches, PostgreSQL has stock for only some of them; one order is
// paid. Each reservation's spans — reserve, send, consume, commit, the
// outbox's relay, the projection, and the compensation of a rejection or
// the payment of an order with its own relay and projection — form one
// trace with the right parents, recorded by an in-memory exporter; the
// consumer's log lines carry the trace id.
func TestOneTracePerReservation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	shutdown, err := tracing.Setup(context.Background(), tracing.Options{Exporter: exp, Service: "pipeline-test"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, shutdown(context.Background())) })

	const pgStock, redisStock, buyers = 4, 6, 6
	h := start(t, pgStock, redisStock)
	g := gateway.New(gateway.Config{ActivityID: h.activity, SKUs: map[int64]int{sku: buckets}, Topic: topicCreate,
		InsecureDevUsers: true, BusinessDeadline: 5 * time.Minute, SendGrace: 5 * time.Second, RequestTTL: time.Minute,
		SendAttempts: 2, SendTimeout: 3 * time.Second, SendWorkers: 4},
		h.rs, h.pool, h.producer, h.ring, logs.New(h.logs, "gateway", logs.Options{ActivityID: h.activity}))
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)

	// A caller's context, new each run (a run's messages left in the
	// broker by an earlier one must not join this run's traces).
	callerTrace := strings.ReplaceAll(uuid.NewString(), "-", "")
	callerSpan := callerTrace[:16]
	reservations := make([]uuid.UUID, buyers)
	var wg sync.WaitGroup
	for u := range buyers { // at once: the consumer receives them as batches
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/activities/%d/skus/%d/reservations", srv.URL, h.activity, sku),
				strings.NewReader(fmt.Sprintf(`{"request_id":%q}`, uuid.NewString())))
			req.Header.Set("X-User-ID", fmt.Sprint(9100+u))
			if u == 0 {
				req.Header.Set(tracing.Header, "00-"+callerTrace+"-"+callerSpan+"-01")
			}
			resp, err := http.DefaultClient.Do(req)
			if !assertNoError(t, err) {
				return
			}
			defer resp.Body.Close()
			var a struct {
				Code          string `json:"code"`
				ReservationID string `json:"reservation_id"`
			}
			if assertNoError(t, json.NewDecoder(resp.Body).Decode(&a)) && a.Code == gateway.CodeQueued {
				reservations[u], _ = uuid.Parse(a.ReservationID)
			}
		}()
	}
	wg.Wait()
	for u, rid := range reservations {
		require.NotEqual(t, uuid.Nil, rid, "buyer %d was not queued", u)
	}
	require.Eventually(t, func() bool {
		return count(t, h.pool, `SELECT count(*) FROM orders WHERE activity_id = $1`, h.activity) == pgStock
	}, 60*time.Second, 100*time.Millisecond, "the orders are created")
	h.checkInvariants(t, pgStock) // every reservation decided, projected and compensated

	// One order is paid; its ORDER_PAID is relayed and projected in its trace.
	var order, paidRes uuid.UUID
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT order_id, reservation_id FROM orders WHERE activity_id = $1 ORDER BY user_id LIMIT 1`,
		h.activity).Scan(&order, &paidRes))
	payments := &payment.Store{Pool: h.pool, EventsTopic: topicEvents}
	result, err := payments.Apply(h.ctx, payment.Callback{Provider: "sim", TransactionID: "trace-" + order.String(), OrderID: order,
		AmountCents: 100, Currency: "CNY", PaidAt: time.Now()})
	require.NoError(t, err)
	require.Equal(t, payment.ResultPaid, result)

	byReservation := func() map[string]spansOf {
		m := map[string]spansOf{}
		traceOf := map[string]string{} // trace id -> reservation
		for _, s := range exp.GetSpans() {
			if r := attr(s, tracing.AttrReservation); s.Name == tracing.SpanReserve && r != "" {
				traceOf[s.SpanContext.TraceID().String()] = r
			}
		}
		for _, s := range exp.GetSpans() {
			r, ok := traceOf[s.SpanContext.TraceID().String()]
			if other := attr(s, tracing.AttrReservation); other != "" && other != r {
				ok = false // another reservation's span in the same trace: not one trace per reservation
				t.Errorf("span %s of reservation %s in the trace of %s", s.Name, other, r)
			}
			if ok {
				m[r] = spansOf{t: t, spans: append(m[r].spans, s)}
			}
		}
		return m
	}
	// Every event is projected (a rejection's projection may come after its
	// compensation settled the stock): one per reservation, and ORDER_PAID.
	require.Eventually(t, func() bool {
		projected := 0
		for _, tr := range byReservation() {
			for _, s := range tr.spans {
				if s.Name == tracing.SpanProject {
					projected++
				}
			}
		}
		return projected >= buyers+1
	}, 30*time.Second, 100*time.Millisecond, "every event's projection joins its reservation's trace")

	// A resend is the same payload: the body the scanner rebuilds from the
	// Redis reservation hashes as the gateway's did, trace fields included.
	for u, rid := range reservations {
		sl := redisstore.Slot{ActivityID: h.activity, SKUID: sku, Bucket: redisstore.BucketFor(int64(9100+u), buckets)}
		hash, err := h.rs.Reservation(h.ctx, sl, rid)
		require.NoError(t, err)
		msg, err := events.FromReservationHash(hash)
		require.NoError(t, err)
		body, err := msg.Marshal()
		require.NoError(t, err)
		var recorded []byte
		require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT payload_hash FROM consumer_inbox WHERE message_id = $1`, msg.MessageID).Scan(&recorded))
		sum := sha256.Sum256(body)
		require.Equal(t, recorded, sum[:], "reservation %s: the scanner's body is the gateway's", rid)
	}

	traces := byReservation()
	require.Len(t, traces, buyers, "one trace per reservation")
	created, rejected := 0, 0
	for u, rid := range reservations {
		tr := traces[rid.String()]
		reserve := tr.one(tracing.SpanReserve, "")
		require.Equal(t, gateway.CodeQueued, attr(reserve, tracing.AttrResult))
		if u == 0 {
			require.Equal(t, callerTrace, reserve.SpanContext.TraceID().String(), "the caller's traceparent is joined")
			require.Equal(t, callerSpan, reserve.Parent.SpanID().String())
		}
		send := tr.one(tracing.SpanSend, "")
		childOf(t, send, reserve)
		consume := tr.one(tracing.SpanConsume, "")
		childOf(t, consume, send)
		childOf(t, tr.one(tracing.SpanCommit, ""), consume)
		switch attr(tr.one(tracing.SpanCommit, ""), tracing.AttrResult) {
		case "ORDER_CREATED":
			created++
			relay := tr.one(tracing.SpanRelay, "ORDER_CREATED")
			childOf(t, relay, consume)
			childOf(t, tr.one(tracing.SpanProject, "ORDER_CREATED"), relay)
			childOf(t, tr.one(tracing.SpanRelay, "ORDER_CANCEL_TIMER"), consume)
		case "ORDER_REJECTED":
			rejected++
			relay := tr.one(tracing.SpanRelay, "RESERVATION_COMPENSATE_REQUIRED")
			childOf(t, relay, consume)
			childOf(t, tr.one(tracing.SpanProject, "RESERVATION_COMPENSATE_REQUIRED"), relay)
			childOf(t, tr.one(tracing.SpanCompensate, ""), consume)
		default:
			t.Fatalf("reservation %s: commit result %q", rid, attr(tr.one(tracing.SpanCommit, ""), tracing.AttrResult))
		}
	}
	require.Equal(t, pgStock, created)
	require.Equal(t, buyers-pgStock, rejected)

	paid := traces[paidRes.String()]
	pay := paid.one(tracing.SpanPayment, "")
	childOf(t, pay, paid.one(tracing.SpanConsume, ""))
	require.Equal(t, payment.ResultPaid, attr(pay, tracing.AttrResult))
	relay := paid.one(tracing.SpanRelay, "ORDER_PAID")
	childOf(t, relay, pay)
	childOf(t, paid.one(tracing.SpanProject, "ORDER_PAID"), relay)

	// The consumer's and the compensator's lines name their reservation's trace.
	traceIDs := map[string]string{}
	for rid, tr := range traces {
		traceIDs[rid] = tr.one(tracing.SpanReserve, "").SpanContext.TraceID().String()
	}
	lines := 0
	for _, l := range h.logs.Lines(t) {
		rid, _ := l[logs.ReservationID].(string)
		ev, _ := l[logs.Event].(string)
		if want, ok := traceIDs[rid]; ok && (ev == logs.EventOrderTransactionCommitted || strings.HasPrefix(ev, "compensation.")) {
			require.Equal(t, want, l[logs.TraceID], "%v", l)
			lines++
		}
	}
	require.GreaterOrEqual(t, lines, buyers, "a committed or compensation line per reservation")
}

// assertNoError reports err from a goroutine (require may not stop one).
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("%v", err)
		return false
	}
	return true
}
