package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/reconcile"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

func setup(t *testing.T) (*reconcile.Job, *control.Store, int64, []control.SKU) {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(ctx, rdb))
	store := &control.Store{Pool: testenv.Database(t), Redis: redisstore.New(rdb)}
	activity := time.Now().UnixNano() % 1_000_000_000_000
	skus := []control.SKU{{ID: 1, Stock: 10, Buckets: 2}, {ID: 2, Stock: 5, Buckets: 1}}
	for _, s := range skus {
		_, err := store.Provision(ctx, activity, s, 1)
		require.NoError(t, err)
	}
	return &reconcile.Job{Pool: store.Pool, Redis: store.Redis}, store, activity, skus
}

func TestCleanRunIsRecorded(t *testing.T) {
	job, store, activity, skus := setup(t)
	rep, err := job.Run(context.Background(), activity, skus, time.Now())
	require.NoError(t, err)
	require.Equal(t, "CLEAN", rep.Status)
	require.Empty(t, rep.Anomalies)
	run, err := store.LastRun(context.Background(), activity)
	require.NoError(t, err)
	require.Equal(t, rep.RunID, run.ID)
	require.Equal(t, "CLEAN", run.Status)
}

// Each conservation break is found with its evidence: Redis drift in one
// bucket, PostgreSQL sold without Redis committed (nothing in flight), and
// a projection that merely lags while reservations are open (INFO).
func TestAnomaliesAreFoundAndRecorded(t *testing.T) {
	ctx := context.Background()
	job, store, activity, skus := setup(t)
	rdb := store.Redis.Client()
	// SKU 1 bucket 1: a unit vanished from Redis' available stock.
	require.NoError(t, rdb.Decr(ctx, redisstore.BucketSlot(activity, 1, 1).Stock()).Err())
	// SKU 2: PostgreSQL sold 2 units that Redis never counted as committed.
	_, err := store.Pool.Exec(ctx, `UPDATE sku_inventory SET available_stock = available_stock - 2, sold_stock = 2 WHERE activity_id = $1 AND sku_id = 2`, activity)
	require.NoError(t, err)
	rep, err := job.Run(ctx, activity, skus, time.Now())
	require.NoError(t, err)
	require.Equal(t, "ANOMALIES", rep.Status)
	types := map[string]reconcile.Anomaly{}
	for _, a := range rep.Anomalies {
		types[a.Type] = a
	}
	require.Equal(t, int64(1), types[reconcile.RedisInvariant].Delta)
	require.Equal(t, "{"+itoa(activity)+":1:1}", types[reconcile.RedisInvariant].Object)
	require.Equal(t, int64(2), types[reconcile.CrossSystem].Delta)
	require.Equal(t, reconcile.Critical, types[reconcile.CrossSystem].Severity)
	require.Equal(t, 2, rep.Critical())
	var rows int
	require.NoError(t, store.Pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_anomaly WHERE run_id = $1`, rep.RunID).Scan(&rows))
	require.Equal(t, 2, rows)

	// The same PostgreSQL lead while Redis still has open reservations: the
	// projection may just lag, so it is reported but not critical.
	require.NoError(t, rdb.HIncrBy(ctx, redisstore.SKUSlot(activity, 2).Counter(), "open_reserved", 2).Err())
	require.NoError(t, rdb.DecrBy(ctx, redisstore.SKUSlot(activity, 2).Stock(), 2).Err())
	rep, err = job.Run(ctx, activity, skus[1:], time.Now())
	require.NoError(t, err)
	require.Len(t, rep.Anomalies, 1)
	require.Equal(t, reconcile.Info, rep.Anomalies[0].Severity)
}

// Two runs at once: one works, the other is refused and records nothing.
func TestConcurrentRunsNeverOverlap(t *testing.T) {
	job, _, activity, skus := setup(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = job.Run(context.Background(), activity, skus, time.Now()) }()
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, reconcile.ErrRunInProgress):
			refused++
		default:
			t.Fatal(err)
		}
	}
	require.GreaterOrEqual(t, ok, 1)
	require.Equal(t, len(errs), ok+refused)
	var running int
	require.NoError(t, job.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reconcile_run WHERE activity_id = $1 AND status = 'RUNNING'`, activity).Scan(&running))
	require.Zero(t, running)
}

func itoa(n int64) string { return fmt.Sprint(n) }

// A gateway killed between the two halves of a stock move left units in
// transit: a fresh move is reported (its mover may be finishing it), an old
// one is settled once by the run, and the next run is clean.
func TestStockInTransitIsSettled(t *testing.T) {
	ctx := context.Background()
	job, store, activity, skus := setup(t)
	src, dst := redisstore.BucketSlot(activity, 1, 1), redisstore.BucketSlot(activity, 1, 0)
	moved, _, err := store.Redis.MoveOut(ctx, src, uuid.New(), dst.Bucket, 10, time.Now())
	require.NoError(t, err)
	require.Equal(t, int64(3), moved) // half of 5, rounded up

	rep, err := job.Run(ctx, activity, skus[:1], time.Now())
	require.NoError(t, err)
	require.Len(t, rep.Anomalies, 1, "%+v", rep.Anomalies)
	require.Equal(t, reconcile.StockInTransit, rep.Anomalies[0].Type)
	require.Equal(t, reconcile.Info, rep.Anomalies[0].Severity)
	require.Equal(t, int64(3), rep.Anomalies[0].Delta)

	// The mover is gone for good: once the move is older than the bound it
	// is settled (its record is back-dated here instead of waiting).
	pending, err := store.Redis.PendingMoves(ctx, skus[0].Slots(activity))
	require.NoError(t, err)
	require.Len(t, pending, 1)
	old := fmt.Sprintf("%d:%d:%d", dst.Bucket, pending[0].Amount, time.Now().Add(-time.Minute).UnixMilli())
	require.NoError(t, store.Redis.Client().HSet(ctx, src.MovesOut(), pending[0].ID.String(), old).Err())
	rep, err = job.Run(ctx, activity, skus[:1], time.Now())
	require.NoError(t, err)
	require.Equal(t, "CLEAN", rep.Status, "%+v", rep.Anomalies)
	var total redisstore.Counters
	for _, sl := range skus[0].Slots(activity) {
		c, err := store.Redis.ReadCounters(ctx, sl)
		require.NoError(t, err)
		total = total.Add(c)
	}
	require.Equal(t, int64(10), total.Available)
	require.Zero(t, total.InTransit())
}
