package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/control"
)

func TestMeterAndHeartbeat(t *testing.T) {
	var m control.Meter
	t0 := time.Unix(1000, 0)
	m.Take(t0)
	for i := 1; i <= 100; i++ {
		m.Observe(time.Duration(i) * time.Millisecond)
	}
	h := m.Take(t0.Add(10 * time.Second))
	require.Equal(t, int64(100), h.Total)
	require.InDelta(t, 10.0, h.RatePerSec, 0.001)
	require.InDelta(t, 51, h.P50ms, 0.001)
	require.InDelta(t, 100, h.P99ms, 0.001)

	pool := testenv.Database(t)
	require.NoError(t, control.ReportHeartbeat(context.Background(), pool, "consumer-a", "order-consumer", 1001, h, 3))
	h.Total = 150
	require.NoError(t, control.ReportHeartbeat(context.Background(), pool, "consumer-a", "order-consumer", 1001, h, 0))
	var total int64
	var rate float64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT commits_total, commit_rate_per_sec FROM consumer_heartbeat WHERE consumer_id = 'consumer-a'`).Scan(&total, &rate))
	require.Equal(t, int64(150), total)
	require.InDelta(t, 10.0, rate, 0.001)
}
