package control

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/sqlfile"
)

var qHeartbeatUpsert = sqlfile.Must(sqlFiles, "heartbeat_upsert")

// Meter measures a consumer's committed transactions between heartbeats.
type Meter struct {
	mu        sync.Mutex
	total     int64
	window    []time.Duration
	since     time.Time
	lastTotal int64
}

// Observe records one committed transaction and how long it took.
func (m *Meter) Observe(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total++
	if len(m.window) < 10000 {
		m.window = append(m.window, d)
	}
}

// Heartbeat is one report.
type Heartbeat struct {
	Total          int64
	RatePerSec     float64
	P50ms, P99ms   float64
	ReportedWindow time.Duration
}

// Take returns the report since the previous Take and starts a new window.
func (m *Meter) Take(now time.Time) Heartbeat {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := Heartbeat{Total: m.total}
	if !m.since.IsZero() {
		h.ReportedWindow = now.Sub(m.since)
		if s := h.ReportedWindow.Seconds(); s > 0 {
			h.RatePerSec = float64(m.total-m.lastTotal) / s
		}
	}
	if n := len(m.window); n > 0 {
		sort.Slice(m.window, func(i, j int) bool { return m.window[i] < m.window[j] })
		h.P50ms = float64(m.window[n/2].Microseconds()) / 1000
		h.P99ms = float64(m.window[n*99/100].Microseconds()) / 1000
	}
	m.window = m.window[:0]
	m.since, m.lastTotal = now, m.total
	return h
}

// ReportHeartbeat upserts a consumer's heartbeat row.
func ReportHeartbeat(ctx context.Context, pool *pgxpool.Pool, consumerID, workload string, activityID int64, h Heartbeat, inFlight int) error {
	var act *int64
	if activityID > 0 {
		act = &activityID
	}
	if _, err := pool.Exec(ctx, qHeartbeatUpsert, consumerID, workload, act, h.Total, h.RatePerSec, h.P50ms, h.P99ms, inFlight); err != nil {
		return fmt.Errorf("reporting heartbeat of %s: %w", consumerID, err)
	}
	return nil
}
