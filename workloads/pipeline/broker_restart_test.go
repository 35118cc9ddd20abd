package pipeline_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// design.md#faults (the broker restarted): the broker (with its proxy) stops while
// buyers keep reserving and every worker keeps running, then comes back on
// the same store. Sends that failed or timed out during the outage are
// left in send_due and resent by the scanner with the same message id;
// consumers, the relay and the projector reconnect by themselves. Every
// accepted reservation becomes exactly one order; nothing is lost or doubled.
func TestBrokerRestartLosesNothing(t *testing.T) {
	mqs := testenv.OwnRocketMQ(t, map[string]string{topicCreate: "NORMAL", topicEvents: "NORMAL", topicCancel: "DELAY"},
		map[string]int{"seckill-test-consumer": 16, "seckill-test-projector": 16})
	// 20 buyers before, 10 during (each send waits out the 2 s timeout) and 20 after the outage.
	const stock, buyers = 60, 50
	h := startOn(t, mqs.Endpoint, stock, stock, 15*time.Minute, nil)
	accepted := 0
	buy := func(from, n int64) {
		for u := from; u < from+n; u++ {
			if _, ok := h.reserve(t, u, true, true); ok {
				accepted++
			}
		}
	}
	buy(7000, 20)
	require.Eventually(t, func() bool { return h.counters(t).Committed == 20 },
		60*time.Second, 200*time.Millisecond, "the first buyers' orders before the outage")

	t.Log("stopping the broker")
	mqs.StopBroker(t)
	outage := time.Now()
	buy(8000, 10) // the gateway's sends fail: the reservations wait in send_due
	t.Logf("reserved during the outage in %s; starting the broker", time.Since(outage).Round(time.Second))
	mqs.StartBroker(t)
	t.Logf("broker down for %s", time.Since(outage).Round(time.Second))
	buy(9000, 20)
	require.Equal(t, buyers, accepted)

	last := time.Now()
	require.Eventually(t, func() bool {
		c := h.counters(t)
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			var due int64
			for _, sl := range redisstore.Slots(h.activity, sku, buckets) {
				n, _ := h.rs.Client().ZCard(h.ctx, sl.SendDue()).Result()
				due += n
			}
			t.Logf("converging: redis %+v send_due %d, orders %d, outbox unsent %d", c, due,
				count(t, h.pool, `SELECT count(*) FROM orders WHERE activity_id = $1`, h.activity),
				count(t, h.pool, `SELECT count(*) FROM event_outbox WHERE status <> 'SENT'`))
		}
		return c.OpenReserved == 0 && c.Committed == buyers &&
			count(t, h.pool, `SELECT count(*) FROM event_outbox WHERE status <> 'SENT'`) == 0
	}, 180*time.Second, 500*time.Millisecond, "every reservation became an order after the restart")
	h.checkInvariants(t, buyers)
	require.Equal(t, buyers, count(t, h.pool, `SELECT count(*) FROM consumer_inbox WHERE consumer_group = 'seckill-test-consumer' AND reservation_id IN (SELECT reservation_id FROM inventory_reservation WHERE activity_id = $1)`, h.activity),
		"one inbox row per message whatever was redelivered")
	require.Zero(t, count(t, h.pool, `SELECT count(*) FROM message_quarantine`), "no resend differed from its original")
}

// Issue 12: the gateway's own producer and entry breaker after a broker
// restart. Buyers keep posting to a gateway (the real HTTP handler with its
// own producer, as the process runs it) while the broker is stopped and
// started again; the gateway must take reservations again within 20 s of the
// broker being back, its liveness must not fail while the broker is away,
// and every accepted reservation still becomes exactly one order.
func TestGatewayTakesTrafficAgainAfterBrokerRestart(t *testing.T) {
	mqs := testenv.OwnRocketMQ(t, map[string]string{topicCreate: "NORMAL", topicEvents: "NORMAL", topicCancel: "DELAY"},
		map[string]int{"seckill-test-consumer": 16, "seckill-test-projector": 16})
	const stock = 3000
	h := startOn(t, mqs.Endpoint, stock, stock, 15*time.Minute, nil)
	gwProducer, err := mq.NewProducer(mqs.Endpoint, topicCreate)
	require.NoError(t, err)
	t.Cleanup(func() { _ = gwProducer.Close() })
	// A second SKU with nothing left: half the buyers are answered SOLD_OUT,
	// a request that never sends (as replays are). One of them taking the
	// breaker's half-open trial once left it open for good.
	const soldOut = sku + 1
	for _, sl := range redisstore.Slots(h.activity, soldOut, buckets) {
		_, _, err := h.rs.Provision(h.ctx, sl, 0, 1)
		require.NoError(t, err)
		require.NoError(t, h.rs.SetWindow(h.ctx, sl, redisstore.WindowActive))
	}
	g := gateway.New(gateway.Config{ActivityID: h.activity, SKUs: map[int64]int{sku: buckets, soldOut: buckets}, Topic: topicCreate,
		InsecureDevUsers: true, BusinessDeadline: 15 * time.Minute, SendGrace: 2 * time.Second, RequestTTL: time.Hour,
		SendAttempts: 2, SendTimeout: time.Second,
		BrokerReachable: func(ctx context.Context) error { return mq.Reachable(ctx, mqs.Endpoint) }},
		h.rs, h.pool, gwProducer, h.ring, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)

	// Buyers: one new user every 25 ms, each retrying its request id until
	// it gets an answer other than SERVICE_UNAVAILABLE (as a client would).
	type answer struct {
		at   time.Time
		code string
	}
	var (
		mu       sync.Mutex
		answers  []answer
		accepted = map[string]bool{}
		unhealth int
		// a replay answered with another reservation id
		replayMismatch int
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() }) // before the server closes (cleanups run last-first)
	wg.Add(2)
	go func() { // buyers
		defer wg.Done()
		user := int64(100000)
		for ctx.Err() == nil {
			user++
			u, req, target := user, ids.NewRandom().String(), sku
			if user%2 == 1 {
				target = soldOut
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					code, rid := testsale.PostAsDevUser(srv.URL, h.activity, target, u, req)
					mu.Lock()
					answers = append(answers, answer{time.Now(), code})
					if code == gateway.CodeQueued {
						accepted[rid] = true
					}
					mu.Unlock()
					if code == gateway.CodeQueued {
						// The client's own retry (its first answer was slow):
						// a replay, which never sends. A replay taking the
						// breaker's half-open trial once left it open forever.
						again, rid2 := testsale.PostAsDevUser(srv.URL, h.activity, target, u, req)
						if again == gateway.CodeQueued && rid2 != rid {
							mu.Lock()
							replayMismatch++
							mu.Unlock()
						}
					}
					if code != gateway.CodeServiceUnavailable && code != "" {
						return
					}
					time.Sleep(500 * time.Millisecond)
				}
			}()
			time.Sleep(40 * time.Millisecond)
		}
	}()
	go func() { // a liveness probe every 500 ms
		defer wg.Done()
		for ctx.Err() == nil {
			if resp, err := testsale.BuyerClient.Get(srv.URL + "/healthz"); err == nil {
				if resp.StatusCode != http.StatusOK {
					mu.Lock()
					unhealth++
					mu.Unlock()
				}
				_ = resp.Body.Close()
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	queuedSince := func(from time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range answers {
			if a.code == gateway.CodeQueued && a.at.After(from) {
				return true
			}
		}
		return false
	}

	start := time.Now()
	require.Eventually(t, func() bool { return queuedSince(start) }, 30*time.Second, 100*time.Millisecond, "taking reservations before the outage")
	time.Sleep(3 * time.Second)
	t.Log("stopping the broker")
	mqs.StopBroker(t)
	down := time.Now()
	time.Sleep(10 * time.Second)
	mqs.StartBroker(t)
	back := time.Now()
	t.Logf("broker down for %s", back.Sub(down).Round(time.Second))
	// While the broker is away the half-open trials still reserve (QUEUED,
	// left to the scanner): recovery is the end of the refusals. 20 s after
	// the broker is back, nothing may be refused any more.
	const bound = 20 * time.Second
	time.Sleep(bound + 5*time.Second)
	stop()
	wg.Wait()
	var last503 time.Time
	queuedLate, refusedLate := 0, 0
	for _, a := range answers {
		if a.code == gateway.CodeServiceUnavailable && a.at.After(last503) {
			last503 = a.at
		}
		if a.at.After(back.Add(bound)) {
			switch a.code {
			case gateway.CodeQueued:
				queuedLate++
			case gateway.CodeServiceUnavailable:
				refusedLate++
			}
		}
	}
	t.Logf("last SERVICE_UNAVAILABLE %s after the broker was back", last503.Sub(back).Round(100*time.Millisecond))
	require.Zero(t, refusedLate, "refusals more than %s after the broker was back", bound)
	require.NotZero(t, queuedLate, "reservations taken more than %s after the broker was back", bound)

	resp, err := http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "ready once the broker is back")
	require.Zero(t, unhealth, "liveness holds while the broker is away (a restart would not help)")
	require.Zero(t, replayMismatch, "a replay answers the same reservation")
	codes := map[string]int{}
	for _, a := range answers {
		codes[a.code]++
	}
	t.Logf("answers: %v; accepted %d", codes, len(accepted))

	require.Eventually(t, func() bool {
		c := h.counters(t)
		return c.OpenReserved == 0 && c.Committed == int64(len(accepted)) &&
			count(t, h.pool, `SELECT count(*) FROM event_outbox WHERE status <> 'SENT'`) == 0
	}, 180*time.Second, 500*time.Millisecond, "every accepted reservation became an order")
	h.checkInvariants(t, len(accepted))
}
