package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/metrics"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

func TestBacklogIsMeasuredOnScrape(t *testing.T) {
	reg := metrics.Registry()
	n := int64(3)
	reg.MustRegister(metrics.NewBacklog("outbox", "Outbox", func(context.Context) (int64, time.Duration, error) {
		return n, 90 * time.Second, nil
	}))
	h := metrics.Handler(reg, &metrics.Health{})
	_, body := get(t, h, "/metrics")
	require.Contains(t, body, "outbox_pending 3\n")
	require.Contains(t, body, "outbox_oldest_age_seconds 90\n")
	n = 0
	_, body = get(t, h, "/metrics")
	require.Contains(t, body, "outbox_pending 0\n")
}

// Every metric of ours is prefixed and carries its activity, collectors
// (the backlog gauges) included; the Go and process metrics keep their
// standard names; a workload without an activity gets the prefix only.
func TestMetricsArePrefixedAndCarryTheActivity(t *testing.T) {
	for name, tc := range map[string]struct {
		activity int64
		want     []string
	}{
		"one activity": {42, []string{`seckill_outbox_send_total{activity="42",result="SENT"} 1`, `seckill_outbox_pending{activity="42"} 2`,
			`seckill_order_consume_total{activity="42",group="g",result="COMMITTED"} 1`}},
		"none": {0, []string{`seckill_outbox_send_total{result="SENT"} 1`, `seckill_outbox_pending 2`}},
	} {
		t.Run(name, func(t *testing.T) {
			all := metrics.Registry()
			reg := metrics.ForActivity(all, tc.activity)
			metrics.NewRelay(reg).Sent.WithLabelValues("SENT").Inc()
			metrics.NewConsumer(reg, "g").Consumed.WithLabelValues("COMMITTED").Inc()
			reg.MustRegister(metrics.NewBacklog("outbox", "Outbox", func(context.Context) (int64, time.Duration, error) { return 2, 0, nil }))
			_, body := get(t, metrics.Handler(all, &metrics.Health{}), "/metrics")
			for _, line := range tc.want {
				require.Contains(t, body, line+"\n")
			}
			require.Contains(t, body, "\ngo_goroutines ")
			for _, line := range strings.Split(body, "\n") {
				if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "go_") || strings.HasPrefix(line, "process_") || strings.HasPrefix(line, "promhttp_") {
					continue
				}
				require.True(t, strings.HasPrefix(line, metrics.Prefix), line)
				if tc.activity > 0 {
					require.Contains(t, line, `activity="42"`)
				}
			}
		})
	}
}

func TestBacklogErrorIsNotAZero(t *testing.T) {
	reg := metrics.Registry()
	reg.MustRegister(metrics.NewBacklog("compensation", "Compensation", func(context.Context) (int64, time.Duration, error) {
		return 0, 0, errors.New("PostgreSQL is down")
	}))
	code, body := get(t, metrics.Handler(reg, &metrics.Health{}), "/metrics")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "PostgreSQL is down")
	require.NotContains(t, body, "compensation_pending 0")
}

func TestHealthAndReadiness(t *testing.T) {
	h := &metrics.Health{Stale: 50 * time.Millisecond}
	srv := metrics.Handler(metrics.Registry(), h)
	code, _ := get(t, srv, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "not ready before the loop starts")
	code, _ = get(t, srv, "/healthz")
	require.Equal(t, http.StatusOK, code, "alive while starting")
	h.Ready()
	code, _ = get(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code)
	time.Sleep(80 * time.Millisecond)
	code, body := get(t, srv, "/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.True(t, strings.HasPrefix(body, "loop has not turned"), body)
	h.Beat()
	code, _ = get(t, srv, "/healthz")
	require.Equal(t, http.StatusOK, code)
	var nilHealth *metrics.Health
	nilHealth.Beat() // a worker without probes
	nilHealth.Ready()
}
