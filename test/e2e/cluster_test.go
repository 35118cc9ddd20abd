// Package e2e runs the product on the local single-node Kubernetes
// (hack/cluster.sh) as a platform team would, through test/clustersale:
// the chart installed with helm and the local image, a Secret pointing at
// the local stack, a SeckillActivity applied and patched while it runs,
// buyers at the gateway Service, and the phases to Completed with the
// invariants checked in PostgreSQL and Redis.
//
// It runs only under SECKILL_E2E=1 (`make e2e`, and `make test` after the
// other packages), which also turns a missing cluster into a failure: the
// sale shares the broker's production topics, so it must not run beside the
// packages that send to them.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/test/clustersale"
)

func repoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

func TestSaleOnTheCluster(t *testing.T) {
	if os.Getenv("SECKILL_E2E") != "1" {
		t.Skip("the sale on the cluster runs under SECKILL_E2E=1 (make e2e, make test)")
	}
	require.NoError(t, clustersale.Connected(repoRoot()), "the local cluster (hack/cluster.sh up, hack/cluster.sh image)")
	pool := testenv.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := clustersale.Run(ctx, clustersale.Options{Root: repoRoot(), DSN: pool.Config().ConnString(),
		RedisAddr: testenv.Get(t, "SECKILL_REDIS_ADDR"), RMQEndpoint: testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), RMQNameServer: testenv.Get(t, "SECKILL_RMQ_NAMESRV"),
		RocketMQCA: readFile(t, testenv.Get(t, "SECKILL_RMQ_CA_FILE")), RedisUsername: testenv.Get(t, "SECKILL_REDIS_USERNAME"), RedisPassword: testenv.Get(t, "SECKILL_REDIS_PASSWORD"),
		RedisCA:      readFile(t, testenv.Get(t, "SECKILL_REDIS_CA_FILE")),
		RMQAccessKey: testenv.Get(t, "SECKILL_RMQ_ACCESS_KEY"), RMQSecretKey: testenv.Get(t, "SECKILL_RMQ_SECRET_KEY"), Stock: 400, Logf: t.Logf})
	if res != nil {
		t.Logf("activity %d in %s, %s; phases %v; health %v; answers %v", res.Activity, res.Namespace, res.Took, res.Phases, res.Health, res.Answers)
	}
	require.NoError(t, err)

	for _, p := range []seckillv1alpha1.Phase{seckillv1alpha1.PhaseScheduled, seckillv1alpha1.PhaseActive, seckillv1alpha1.PhasePaused,
		seckillv1alpha1.PhaseDraining, seckillv1alpha1.PhaseReconciling, seckillv1alpha1.PhaseCompleted} {
		require.True(t, res.Seen[p], "phase %s reached: %v", p, res.Phases)
	}
	require.NotEmpty(t, res.KilledPod, "a consumer pod was force-deleted mid-sale")
	require.True(t, res.ScaledUp, "the operator scaled the consumers up from the backlog: %+v", res.Consumers)
	require.True(t, res.ScaledDown, "and back down after the stabilization: %+v", res.Consumers)
	require.True(t, res.GuardSet, "the backlog guard paused compensation")
	require.True(t, res.GuardCleared, "and cleared it once drained")
	require.Positive(t, res.Answers["ACTIVITY_PAUSED"], "paused: the gateway refused")
	require.Positive(t, res.Answers["SOLD_OUT"], "more buyers than stock")
	for _, c := range res.Checks {
		t.Logf("check %-5v %s: %s", c.OK, c.Name, c.Got)
	}
	require.Empty(t, res.Failed(), "every invariant holds")
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // the stack's CA
	require.NoError(t, err)
	return b
}
