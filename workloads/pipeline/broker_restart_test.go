package pipeline_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/testenv"
)

// DESIGN §7 "broker restart": the broker (with its proxy) stops while
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
