package mq_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/mq"
)

// BenchmarkDeliveryLatency measures send → receive at a low rate (one
// message per BENCH_GAP, 50ms: 20/s, well below any capacity) on the real
// broker, with one and two consumers of the group, each spending BENCH_WORK
// (0) per message before its ack: the time a message waits for a
// long-polling consumer, p50/p99, and the ack's p50. It found the 3 s tail
// of a 5 s await with two consumers (mq.ReceiveAwait).
//
//	go test -run XXX -bench DeliveryLatency -benchtime 400x ./workloads/mq
func BenchmarkDeliveryLatency(b *testing.B) {
	for _, consumers := range []int{1, 2} {
		b.Run(strconv.Itoa(consumers)+"-consumers", func(b *testing.B) { deliveryLatency(b, consumers) })
	}
}

func deliveryLatency(b *testing.B, consumers int) {
	if g, err := time.ParseDuration(os.Getenv("BENCH_GAP")); err == nil {
		benchGap = g
	}
	if w, err := time.ParseDuration(os.Getenv("BENCH_WORK")); err == nil {
		benchWork = w
	}
	endpoint := testenv.Get(b, "SECKILL_RMQ_ENDPOINT")
	const topic, group = "seckill-bench-latency", "seckill-bench-latency"
	prod, err := mq.NewProducer(endpoint, topic)
	require.NoError(b, err)
	b.Cleanup(func() { _ = prod.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := strconv.FormatInt(time.Now().UnixNano(), 10) + ":"
	var mu sync.Mutex
	var lat, acks []time.Duration
	received := make(chan struct{}, 1<<16)
	for range consumers {
		cons, err := mq.NewConsumer(endpoint, group, topic)
		require.NoError(b, err)
		b.Cleanup(func() { _ = cons.Close() })
		go func() {
			for ctx.Err() == nil {
				ds, err := cons.Receive(ctx, 16, 30*time.Second)
				if err != nil {
					continue
				}
				now := time.Now()
				for _, d := range ds {
					time.Sleep(benchWork)
					t0 := time.Now()
					_ = cons.Ack(ctx, d)
					mu.Lock()
					acks = append(acks, time.Since(t0))
					mu.Unlock()
					body := string(d.Body)
					if len(body) <= len(run) || body[:len(run)] != run {
						continue // an earlier run's
					}
					ns, _ := strconv.ParseInt(body[len(run):], 10, 64)
					mu.Lock()
					lat = append(lat, now.Sub(time.Unix(0, ns)))
					mu.Unlock()
					received <- struct{}{}
				}
			}
		}()
	}
	n := max(b.N, 100)
	b.ResetTimer()
	for range n {
		id := ids.NewRandom().String()
		_, err := prod.Send(ctx, mq.Message{Topic: topic, MessageID: id, Body: []byte(run + strconv.FormatInt(time.Now().UnixNano(), 10))})
		require.NoError(b, err)
		time.Sleep(benchGap)
	}
	for range n {
		select {
		case <-received:
		case <-time.After(30 * time.Second):
			b.Fatal("a message did not arrive within 30 s")
		}
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	slices.Sort(acks)
	b.ReportMetric(float64(acks[len(acks)/2].Microseconds())/1000, "ack-p50-ms")
}

// benchGap and benchWork: BENCH_GAP and BENCH_WORK.
var (
	benchGap  = 50 * time.Millisecond
	benchWork time.Duration
)
