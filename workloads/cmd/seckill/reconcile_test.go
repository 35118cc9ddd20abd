package main_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

// The reconcile job as the CronJob runs it: exit 0 and a readable report
// when the stores agree; exit 1 naming the anomaly when they do not.
func TestReconcileCommand(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	rdb := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(ctx, rdb))
	store := &control.Store{Pool: testenv.Database(t), Redis: redisstore.New(rdb)}
	activity := time.Now().UnixNano() % 1_000_000_000_000
	_, err := store.Provision(ctx, activity, control.SKU{ID: 3, Stock: 8, Buckets: 2}, 1)
	require.NoError(t, err)
	args := []string{"reconcile", "-pg-dsn", store.Pool.Config().ConnString(), "-redis-addrs", testenv.Get(t, "SECKILL_REDIS_ADDR"),
		"-activity-id", strconv.FormatInt(activity, 10), "-skus", "3:2", "-watermark-lag", "0s"}
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), ": CLEAN")

	require.NoError(t, rdb.IncrBy(ctx, redisstore.BucketSlot(activity, 3, 0).Stock(), 3).Err()) // 3 units appeared from nowhere
	out, err = exec.Command(bin, append(args, "-final")...).CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "REDIS_INTERNAL_INVARIANT_BROKEN")
	require.Contains(t, string(out), "1 critical anomalies left for manual review")
}
