package orderstore_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
)

// createdPath is the consumer's created-order transaction, in order
// (design.md#order-transaction): its SQL files, under workloads/.
var createdPath = []string{"inbox/sql/claim", "orderstore/sql/reservation_upsert", "orderstore/sql/reservation_lock",
	"orderstore/sql/order_insert", "orderstore/sql/reservation_created", "orderstore/sql/ledger_occupy",
	"outbox/sql/insert", "outbox/sql/timer_insert", "inbox/sql/finish", "orderstore/sql/stock_occupy_many"}

var (
	sqlComment = regexp.MustCompile(`(?m)--.*$`)
	dollarArg  = regexp.MustCompile(`\$[0-9]+`)
	colonArg   = regexp.MustCompile(`:[a-z_][a-z0-9_]*`)
	spaces     = regexp.MustCompile(`\s+`)
)

// normalize drops comments and the final semicolon, turns $n and :name
// parameters into ? (casts :: kept) and collapses whitespace.
func normalize(sql string) string {
	s := sqlComment.ReplaceAllString(sql, "")
	s = strings.ReplaceAll(s, "::", "\x00")
	s = dollarArg.ReplaceAllString(s, "?")
	s = colonArg.ReplaceAllString(s, "?")
	s = strings.ReplaceAll(s, "\x00", "::")
	s = spaces.ReplaceAllString(s, " ")
	return strings.TrimSuffix(strings.TrimSpace(s), ";")
}

// The pgbench ceiling of hack/bench-order.sh runs exactly the consumer's
// statements, in the consumer's order.
func TestPgbenchScriptIsTheConsumersTransaction(t *testing.T) {
	raw, err := os.ReadFile("../../hack/bench/order_txn.pgbench")
	require.NoError(t, err)
	script := normalize(string(raw))
	at := 0
	for _, name := range createdPath {
		q, err := os.ReadFile("../" + name + ".sql")
		require.NoError(t, err)
		stmt := normalize(string(q))
		i := strings.Index(script[at:], stmt)
		require.GreaterOrEqual(t, i, 0, "hack/bench/order_txn.pgbench lacks (or reorders) %s.sql:\n%s", name, stmt)
		at += i + len(stmt)
	}
}

// hotSKUConsumer is a consumer on a fresh database whose one SKU has stock
// for any benchmark.
func hotSKUConsumer(b *testing.B) *orderstore.Consumer {
	pool := testenv.Database(b)
	_, err := pool.Exec(context.Background(), `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`,
		activity, sku, int64(1_000_000_000_000))
	require.NoError(b, err)
	return &orderstore.Consumer{Pool: pool, Group: "seckill-order-consumer", PaymentWindow: 15 * time.Minute}
}

// benchMessage is a new reservation's order-create message of user.
func benchMessage(user int64) orderstore.Item {
	rid, now := ids.NewRandom(), time.Now()
	m := events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested,
		MessageID: ids.NewRandom(), MessageKey: rid.String(), RequestID: ids.NewRandom(), ReservationID: rid,
		ActivityID: activity, SKUID: sku, UserID: user, Bucket: 0, ReservedAt: now, BusinessDeadline: now.Add(time.Hour)}
	raw, _ := m.Marshal()
	return orderstore.Item{Msg: m, Raw: raw}
}

// BenchmarkOrderTransaction is the consumer's transaction on the real
// PostgreSQL, 32 at a time (hack/bench-order.sh prints it next to pgbench
// of the same statements).
func BenchmarkOrderTransaction(b *testing.B) {
	ctx := context.Background()
	c := hotSKUConsumer(b)
	var user atomic.Int64
	b.SetParallelism(16) // × GOMAXPROCS goroutines: 32 on this machine, as pgbench -c 32
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			it := benchMessage(user.Add(1))
			out, err := c.Consume(ctx, it.Msg, it.Raw)
			if err != nil || out.Result != orderstore.ResultOrderCreated {
				b.Errorf("consume: %v %+v", err, out)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
}

// BenchmarkOrderBatch is ConsumeBatch on the real PostgreSQL: batches of
// BENCH_BATCH (16) messages, from 2 goroutines (two consumers), on one hot
// SKU — the database half of the consumer group, without the broker.
func BenchmarkOrderBatch(b *testing.B) {
	size := 16
	if v, err := strconv.Atoi(os.Getenv("BENCH_BATCH")); err == nil && v > 0 {
		size = v
	}
	ctx := context.Background()
	c := hotSKUConsumer(b)
	var user atomic.Int64
	next := make(chan int, b.N/size+1)
	for range b.N / size {
		next <- size
	}
	if r := b.N % size; r > 0 {
		next <- r
	}
	close(next)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				items := make([]orderstore.Item, n)
				for i := range items {
					items[i] = benchMessage(user.Add(1))
				}
				for _, r := range c.ConsumeBatch(ctx, items) {
					if r.Err != nil || r.Outcome.Result != orderstore.ResultOrderCreated {
						b.Errorf("consume: %v %+v", r.Err, r.Outcome)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
}
