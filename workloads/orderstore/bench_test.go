package orderstore_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/testenv"
)

// createdPath is the consumer's created-order transaction, in order (seed §9.3).
var createdPath = []string{"inbox_insert", "reservation_upsert", "reservation_lock", "stock_occupy", "order_insert",
	"reservation_created", "ledger_occupy", "outbox_insert", "timer_insert", "inbox_finish"}

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
		q, err := os.ReadFile("sql/" + name + ".sql")
		require.NoError(t, err)
		stmt := normalize(string(q))
		i := strings.Index(script[at:], stmt)
		require.GreaterOrEqual(t, i, 0, "hack/bench/order_txn.pgbench lacks (or reorders) %s.sql:\n%s", name, stmt)
		at += i + len(stmt)
	}
}

// BenchmarkOrderTransaction is the consumer's transaction on the real
// PostgreSQL, 32 at a time (hack/bench-order.sh prints it next to pgbench
// of the same statements).
func BenchmarkOrderTransaction(b *testing.B) {
	pool := testenv.Database(b)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, $2, $3, $3)`,
		activity, sku, int64(1_000_000_000_000))
	require.NoError(b, err)
	c := &orderstore.Consumer{Pool: pool, Group: "seckill-order-consumer", PaymentWindow: 15 * time.Minute}
	var user atomic.Int64
	b.SetParallelism(16) // × GOMAXPROCS goroutines: 32 on this machine, as pgbench -c 32
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rid := ids.NewRandom()
			now := time.Now()
			m := events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested,
				MessageID: ids.NewRandom(), MessageKey: rid.String(), RequestID: ids.NewRandom(), ReservationID: rid,
				ActivityID: activity, SKUID: sku, UserID: user.Add(1), Bucket: 0, ReservedAt: now, BusinessDeadline: now.Add(time.Hour)}
			raw, _ := m.Marshal()
			out, err := c.Consume(ctx, m, raw)
			if err != nil || out.Result != orderstore.ResultOrderCreated {
				b.Errorf("consume: %v %+v", err, out)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
}
