package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

func TestBucketTargets(t *testing.T) {
	cases := []struct {
		stock int64
		n     int
		want  []int64
	}{
		{10, 1, []int64{10}}, {10, 4, []int64{3, 3, 2, 2}}, {3, 4, []int64{1, 1, 1, 0}}, {0, 2, []int64{0, 0}}, {7, 0, []int64{7}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, control.BucketTargets(c.stock, c.n), "%d over %d", c.stock, c.n)
	}
	// Growth never takes from a bucket.
	for stock := int64(0); stock < 50; stock++ {
		a, b := control.BucketTargets(stock, 4), control.BucketTargets(stock+1, 4)
		for i := range a {
			require.GreaterOrEqual(t, b[i], a[i])
		}
	}
}

func newStore(t *testing.T, c redis.UniversalClient) (*control.Store, int64) {
	t.Helper()
	require.NoError(t, redisstore.LoadScripts(context.Background(), c))
	return &control.Store{Pool: testenv.Database(t), Redis: redisstore.New(c)}, time.Now().UnixNano() % 1_000_000_000_000
}

// Provisioning writes PostgreSQL and every Redis bucket once per generation;
// a stock increase is applied once to both however often it is repeated;
// a decrease is refused and changes nothing.
func TestProvisionOncePerGeneration(t *testing.T) {
	for name, c := range testenv.Redises(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, activity := newStore(t, c)
			sku := control.SKU{ID: 7, Stock: 10, Buckets: 4}
			for i, want := range []string{control.Applied, control.AlreadyApplied, control.AlreadyApplied} {
				p, err := s.Provision(ctx, activity, sku, 1)
				require.NoError(t, err)
				require.Equal(t, want, p.Postgres, "call %d", i)
				require.Len(t, p.Redis, 4)
				require.Equal(t, i == 0, p.Changed())
			}
			counts := func() control.SKUCounts {
				cs, _, err := s.Counts(ctx, activity, []control.SKU{sku}, time.Now())
				require.NoError(t, err)
				return cs[0]
			}
			got := counts()
			require.Equal(t, []int64{10, 10, 10, 10}, []int64{got.Initial, got.Available, got.RedisInitial, got.RedisAvailable})

			// A sale in between: the increase adds to what is left.
			_, err := s.Pool.Exec(ctx, `UPDATE sku_inventory SET available_stock = available_stock - 2, sold_stock = 2 WHERE activity_id = $1`, activity)
			require.NoError(t, err)
			sku.Stock = 15
			for range 3 {
				_, err := s.Provision(ctx, activity, sku, 2)
				require.NoError(t, err)
			}
			got = counts()
			require.Equal(t, []int64{15, 13, 2, 15, 15}, []int64{got.Initial, got.Available, got.Sold, got.RedisInitial, got.RedisAvailable})
			var ledger int
			require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM stock_provision WHERE activity_id = $1`, activity).Scan(&ledger))
			require.Equal(t, 2, ledger, "one ledger row per generation that changed stock")

			sku.Stock = 12
			_, err = s.Provision(ctx, activity, sku, 3)
			require.ErrorIs(t, err, control.ErrStockDecrease)
			require.Equal(t, got, counts())
		})
	}
}

// The SKU's price is recorded with its stock (orders copy it); a new price
// replaces it, a provision without one keeps it, a bad one is refused.
func TestProvisionRecordsThePrice(t *testing.T) {
	ctx := context.Background()
	s, activity := newStore(t, testenv.RedisSingle(t))
	price := func() (cents int64, currency string) {
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT price_cents, currency FROM sku_inventory WHERE activity_id = $1 AND sku_id = 7`, activity).Scan(&cents, &currency))
		return cents, currency
	}
	sku := control.SKU{ID: 7, Stock: 10, Buckets: 1, PriceCents: 1999, Currency: "EUR"}
	_, err := s.Provision(ctx, activity, sku, 1)
	require.NoError(t, err)
	cents, cur := price()
	require.Equal(t, []any{int64(1999), "EUR"}, []any{cents, cur})
	sku.PriceCents = 2499
	_, err = s.Provision(ctx, activity, sku, 1)
	require.NoError(t, err)
	cents, _ = price()
	require.Equal(t, int64(2499), cents)
	sku.PriceCents = 0
	_, err = s.Provision(ctx, activity, sku, 1)
	require.NoError(t, err)
	cents, _ = price()
	require.Equal(t, int64(2499), cents, "no price given: the recorded one stays")
	sku.PriceCents, sku.Currency = 100, "euro"
	_, err = s.Provision(ctx, activity, sku, 1)
	require.Error(t, err)
}

func TestWindowPauseAndArchive(t *testing.T) {
	ctx := context.Background()
	c := testenv.RedisSingle(t)
	s, activity := newStore(t, c)
	skus := []control.SKU{{ID: 1, Stock: 4, Buckets: 2}, {ID: 2, Stock: 1, Buckets: 1}}
	for _, sku := range skus {
		_, err := s.Provision(ctx, activity, sku, 1)
		require.NoError(t, err)
	}
	require.NoError(t, s.SetWindow(ctx, activity, skus, control.Settings{Window: redisstore.WindowActive,
		BusinessDeadline: time.Minute, PaymentWindow: 2 * time.Minute, Generation: 1}))
	for _, sku := range skus {
		for _, sl := range sku.Slots(activity) {
			v, err := c.Get(ctx, sl.Window()).Result()
			require.NoError(t, err)
			require.Equal(t, redisstore.WindowActive, v)
		}
	}
	var window string
	var deadline int64
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT window_state, business_deadline_ms FROM activity_control WHERE activity_id = $1`, activity).Scan(&window, &deadline))
	require.Equal(t, []any{"ACTIVE", int64(60000)}, []any{window, deadline})

	// The backlog guard's flag: changed once, then not again; the window upsert leaves it.
	for i, want := range []bool{true, false} {
		changed, err := s.SetCompensationPaused(ctx, activity, true, "backlog 3m old")
		require.NoError(t, err)
		require.Equal(t, want, changed, "call %d", i)
	}
	require.NoError(t, s.SetWindow(ctx, activity, skus, control.Settings{Window: redisstore.WindowPaused,
		BusinessDeadline: time.Minute, PaymentWindow: 2 * time.Minute, Generation: 2}))
	var paused bool
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT compensation_paused FROM activity_control WHERE activity_id = $1`, activity).Scan(&paused))
	require.True(t, paused, "the window upsert leaves the guard's flag alone")
	changed, err := s.SetCompensationPaused(ctx, activity, false, "")
	require.NoError(t, err)
	require.True(t, changed)

	// Archive: traffic stops, every key gets the retention TTL, PostgreSQL stays.
	n, err := s.Archive(ctx, activity, skus, time.Hour)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 3*3, "window, stock and counter of three slots at least")
	for _, sku := range skus {
		for _, sl := range sku.Slots(activity) {
			v, err := c.Get(ctx, sl.Window()).Result()
			require.NoError(t, err)
			require.Equal(t, redisstore.WindowEnded, v)
			ttl, err := c.PTTL(ctx, sl.Stock()).Result()
			require.NoError(t, err)
			require.InDelta(t, time.Hour.Seconds(), ttl.Seconds(), 5)
		}
	}
	var rows int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1`, activity).Scan(&rows))
	require.Equal(t, 2, rows)
}

func TestConsumersAndDBCommits(t *testing.T) {
	ctx := context.Background()
	s, activity := newStore(t, testenv.RedisSingle(t))
	for i, h := range []control.Heartbeat{{Total: 100, RatePerSec: 120, P50ms: 4, P99ms: 20}, {Total: 80, RatePerSec: 80, P50ms: 6, P99ms: 45}} {
		require.NoError(t, control.ReportHeartbeat(ctx, s.Pool, []string{"c1", "c2"}[i], "order-consumer", activity, h, 0))
	}
	require.NoError(t, control.ReportHeartbeat(ctx, s.Pool, "old", "order-consumer", activity, control.Heartbeat{RatePerSec: 999}, 0))
	_, err := s.Pool.Exec(ctx, `UPDATE consumer_heartbeat SET reported_at = now() - interval '10 minutes' WHERE consumer_id = 'old'`)
	require.NoError(t, err)
	c, err := s.ReadConsumers(ctx, activity, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2, c.Live, "the stale heartbeat is not counted")
	require.InDelta(t, 200, c.Rate, 0.001)
	require.Equal(t, 5*time.Millisecond, c.P50)
	require.Equal(t, 45*time.Millisecond, c.P99)
	a, err := s.DBCommits(ctx)
	require.NoError(t, err)
	b, err := s.DBCommits(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, b, a)
}
