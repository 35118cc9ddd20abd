package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/pipeline"
)

// BenchmarkConsumerGroup measures the order consumers' throughput on one
// hot SKU, the real broker and PostgreSQL: BENCH_ORDERS (2000) order-create
// messages are sent first, then 1, 2 and 4 consumers (each its own process
// loop and broker client, started before the clock) turn them into orders;
// orders/s is from the first consumer's start to the last order; the median
// of -benchtime runs. hack/bench-order.sh runs it next to pgbench's ceiling
// of the one-order transaction. Measured here (2 cores, medians of 3, 4000
// messages): 2880 / 3274 / 3169 orders/s for 1 / 2 / 4 consumers with
// pgbench at 953 tx/s — 3.0–3.4× (one transaction per received batch,
// set-wise). The one-order-per-transaction consumer before it measured
// 300 / 343 / 319 (client startup inside the clock, pgbench at 576 then).
//
//	go test -run XXX -bench ConsumerGroup -benchtime 3x ./workloads/pipeline
func BenchmarkConsumerGroup(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("BENCH_ORDERS")); err == nil && v > 0 {
		n = v
	}
	for _, consumers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("%d-consumers", consumers), func(b *testing.B) {
			rates := make([]float64, 0, b.N)
			for range b.N {
				rates = append(rates, consumerGroupOnce(b, n, consumers))
			}
			slices.Sort(rates)
			b.ReportMetric(rates[len(rates)/2], "median-orders/s")
		})
	}
}

const benchTopic, benchGroup = "seckill-bench-create", "seckill-bench-consumer"

func consumerGroupOnce(b *testing.B, n, consumers int) float64 {
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endpoint := testenv.Get(b, "SECKILL_RMQ_ENDPOINT")
	pool := testenv.Database(b)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	const hot = int64(1)
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`, activity, hot, n)
	require.NoError(b, err)

	// Whatever an earlier run left in the group is consumed first (into
	// that run's database, which no longer matters): drain it.
	drain, err := mq.NewConsumer(endpoint, benchGroup, benchTopic)
	require.NoError(b, err)
	for {
		ds, err := drain.Receive(ctx, 32, 2*time.Second)
		if err != nil || len(ds) == 0 {
			break
		}
		for _, d := range ds {
			_ = drain.Ack(ctx, d)
		}
	}
	_ = drain.Close()

	prod, err := mq.NewProducer(endpoint, benchTopic)
	require.NoError(b, err)
	defer func() { _ = prod.Close() }()
	now := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for u := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func(user int64) {
			defer wg.Done()
			defer func() { <-sem }()
			rid, mid, req := ids.NewRandom(), ids.NewRandom(), ids.NewRandom()
			msg := events.NewOrderCreateRequested(rid, mid, req, activity, hot, user, -1, now.UnixMilli(), now.Add(time.Hour).UnixMilli(), "")
			body, _ := msg.Marshal()
			_, err := prod.Send(ctx, mq.Message{Topic: benchTopic, MessageID: mid.String(), Key: rid.String(), Tag: events.TypeOrderCreateRequested, Body: body})
			require.NoError(b, err)
		}(int64(u + 1))
	}
	wg.Wait()

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var run sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	// The consumers' clients start before the clock (in a sale they are
	// running long before the first message).
	counts := &orderstore.BatchCounts{}
	ocs := make([]*pipeline.OrderConsumer, consumers)
	for i := range consumers {
		c, err := mq.NewConsumer(endpoint, benchGroup, benchTopic)
		require.NoError(b, err)
		defer func() { _ = c.Close() }()
		ocs[i] = &pipeline.OrderConsumer{MQ: c, Invisible: 30 * time.Second, Log: log, ID: fmt.Sprintf("bench-%d", i), ActivityID: activity,
			Store: &orderstore.Consumer{Pool: pool, Group: benchGroup, PaymentWindow: 15 * time.Minute, EventsTopic: topicEvents,
				CancelTopic: topicCancel, Batches: counts}}
	}
	b.StartTimer()
	start := time.Now()
	for _, oc := range ocs {
		run.Add(1)
		go func() { defer run.Done(); _ = oc.Run(runCtx) }()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var orders int
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, activity).Scan(&orders))
		if orders >= n {
			break
		}
		require.True(b, time.Now().Before(deadline), "%d of %d orders after 5 minutes", orders, n)
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	b.StopTimer()
	stop()
	run.Wait()
	// The messages were sent without Redis reservations, and no relay runs.
	r, err := invariants.Run(ctx, invariants.Sources{Pool: pool}, activity, nil, invariants.Expect{NoRedis: true, Within: time.Hour})
	require.NoError(b, err)
	require.True(b, r.OK(), r.String())
	b.Logf("%d consumers: %d orders in %v; batches set-wise %d, message by message %d", consumers, n, took.Round(time.Millisecond),
		counts.SetWise.Load(), counts.FellBack.Load())
	return float64(n) / took.Seconds()
}
