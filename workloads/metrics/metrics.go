// Package metrics holds the workers' Prometheus metrics of design.md#metrics and
// the small HTTP server (metrics, liveness, readiness) every worker runs.
// Each worker registers only what it updates; names follow the seed's table.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Consumer metrics (MQ → PostgreSQL).
type Consumer struct {
	Consumed        *prometheus.CounterVec // order_consume_total{result}
	Duplicates      prometheus.Counter     // inbox_duplicate_total
	PayloadConflict prometheus.Counter     // inbox_payload_conflict_total
	CommitUnknown   prometheus.Counter     // db_commit_unknown_total
	StockReject     prometheus.Counter     // db_final_stock_reject_total
	UserUnique      prometheus.Counter     // order_user_unique_conflict_total
	Quarantined     *prometheus.CounterVec // message_quarantined_total{reason}
	DeadLettered    prometheus.Counter     // message_dead_lettered_total
	// ToOrder is reservation → order: from the reservation in Redis to its
	// order committed in PostgreSQL — the number the 3 s SLO is about.
	ToOrder prometheus.Histogram // reservation_to_order_seconds
}

// ToOrderBuckets are reservation_to_order_seconds' buckets: fine around
// the 3 s SLO, coarse beyond it.
var ToOrderBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 10, 30, 60, 120}

// NewConsumer registers the consumer metrics of one group.
func NewConsumer(reg prometheus.Registerer, group string) *Consumer {
	l := prometheus.Labels{"group": group}
	m := &Consumer{
		Consumed:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "order_consume_total", Help: "Order-create messages by result.", ConstLabels: l}, []string{"result"}),
		Duplicates:      prometheus.NewCounter(prometheus.CounterOpts{Name: "inbox_duplicate_total", Help: "Deliveries answered from the inbox.", ConstLabels: l}),
		PayloadConflict: prometheus.NewCounter(prometheus.CounterOpts{Name: "inbox_payload_conflict_total", Help: "Same message id with a different payload (alert).", ConstLabels: l}),
		CommitUnknown:   prometheus.NewCounter(prometheus.CounterOpts{Name: "db_commit_unknown_total", Help: "Commits whose outcome had to be verified.", ConstLabels: l}),
		StockReject:     prometheus.NewCounter(prometheus.CounterOpts{Name: "db_final_stock_reject_total", Help: "Reservations rejected by the final PostgreSQL stock.", ConstLabels: l}),
		UserUnique:      prometheus.NewCounter(prometheus.CounterOpts{Name: "order_user_unique_conflict_total", Help: "Reservations rejected by the one-order-per-user unique.", ConstLabels: l}),
		Quarantined:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "message_quarantined_total", Help: "Messages kept for manual review, by reason.", ConstLabels: l}, []string{"reason"}),
		DeadLettered:    prometheus.NewCounter(prometheus.CounterOpts{Name: "message_dead_lettered_total", Help: "Messages given up at the group's last attempt: the broker moves them to the DLQ (alert).", ConstLabels: l}),
		ToOrder: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reservation_to_order_seconds",
			Help: "Reservation in Redis → its order committed in PostgreSQL (the 3 s SLO).", ConstLabels: l, Buckets: ToOrderBuckets}),
	}
	reg.MustRegister(m.Consumed, m.Duplicates, m.PayloadConflict, m.CommitUnknown, m.StockReject, m.UserUnique, m.Quarantined, m.DeadLettered, m.ToOrder)
	return m
}

// Relay metrics (outbox → MQ).
type Relay struct {
	Sent         *prometheus.CounterVec // outbox_send_total{result}
	Manual       prometheus.Counter     // outbox_manual_total
	LeaseExpired prometheus.Counter     // outbox_lease_expired_total
	Attempts     prometheus.Histogram   // outbox_attempt_count: attempts an event took to be sent
}

// NewRelay registers the relay metrics.
func NewRelay(reg prometheus.Registerer) *Relay {
	m := &Relay{
		Sent:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "outbox_send_total", Help: "Outbox sends by result (SENT, RETRY, MANUAL).", ConstLabels: nil}, []string{"result"}),
		Manual: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_manual_total", Help: "Outbox events given up after the attempt cap (alert)."}),
		LeaseExpired: prometheus.NewCounter(prometheus.CounterOpts{Name: "outbox_lease_expired_total",
			Help: "Outbox events claimed from a lease that ran out (a relay died or stalled between send and mark)."}),
		Attempts: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "outbox_attempt_count",
			Help: "Attempts an outbox event took until the broker took it.", Buckets: []float64{1, 2, 3, 5, 8, 13, 21}}),
	}
	reg.MustRegister(m.Sent, m.Manual, m.LeaseExpired, m.Attempts)
	return m
}

// Compensator metrics.
type Compensator struct {
	Total          *prometheus.CounterVec // compensation_total{result}
	AlreadyApplied prometheus.Counter     // compensation_already_applied_total
	RedisMissing   prometheus.Counter     // compensation_redis_missing_total
	StateConflict  prometheus.Counter     // compensation_state_conflict_total
}

// NewCompensator registers the compensator metrics.
func NewCompensator(reg prometheus.Registerer) *Compensator {
	m := &Compensator{
		Total:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "compensation_total", Help: "Compensation runs by result (APPLIED, RETRY, MANUAL)."}, []string{"result"}),
		AlreadyApplied: prometheus.NewCounter(prometheus.CounterOpts{Name: "compensation_already_applied_total", Help: "Compensations found already applied in Redis (completed in PostgreSQL)."}),
		RedisMissing:   prometheus.NewCounter(prometheus.CounterOpts{Name: "compensation_redis_missing_total", Help: "Compensations whose Redis reservation is missing (manual)."}),
		StateConflict:  prometheus.NewCounter(prometheus.CounterOpts{Name: "compensation_state_conflict_total", Help: "Compensations refused for a conflicting state (manual)."}),
	}
	reg.MustRegister(m.Total, m.AlreadyApplied, m.RedisMissing, m.StateConflict)
	return m
}

// Scanner metrics (Redis → MQ resends).
type Scanner struct {
	Resent  prometheus.Counter   // reservation_resend_total
	Unknown prometheus.Counter   // reservation_send_unknown_total
	Sends   prometheus.Histogram // reservation_send_attempts_histogram
}

// NewScanner registers the send-scanner metrics.
func NewScanner(reg prometheus.Registerer) *Scanner {
	m := &Scanner{
		Resent:  prometheus.NewCounter(prometheus.CounterOpts{Name: "reservation_resend_total", Help: "Order-create messages resent by the scanner."}),
		Unknown: prometheus.NewCounter(prometheus.CounterOpts{Name: "reservation_send_unknown_total", Help: "Resends whose outcome is unknown (rescheduled)."}),
		Sends:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "reservation_send_attempts_histogram", Help: "Send attempts a reservation needed, observed when the scanner succeeds.", Buckets: []float64{1, 2, 3, 5, 8, 13, 21}}),
	}
	reg.MustRegister(m.Resent, m.Unknown, m.Sends)
	return m
}

// Projector metrics.
type Projector struct {
	Projected *prometheus.CounterVec // projection_total{result}
}

// NewProjector registers the projector metrics.
func NewProjector(reg prometheus.Registerer) *Projector {
	m := &Projector{Projected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "projection_total", Help: "Order events applied to Redis, by result."}, []string{"result"})}
	reg.MustRegister(m.Projected)
	return m
}

// Backlog is a gauge pair measured on each scrape: how many items wait and
// how old the oldest is (outbox_pending / outbox_oldest_age_seconds, ...).
type Backlog struct {
	count, age *prometheus.Desc
	measure    func(ctx context.Context) (n int64, oldest time.Duration, err error)
}

// NewBacklog builds a backlog collector named prefix_pending and
// prefix_oldest_age_seconds; measure runs on every scrape with a timeout.
func NewBacklog(prefix, help string, measure func(ctx context.Context) (int64, time.Duration, error)) *Backlog {
	return &Backlog{
		count:   prometheus.NewDesc(prefix+"_pending", help+": items waiting.", nil, nil),
		age:     prometheus.NewDesc(prefix+"_oldest_age_seconds", help+": age of the oldest waiting item.", nil, nil),
		measure: measure,
	}
}

// Describe implements prometheus.Collector.
func (b *Backlog) Describe(ch chan<- *prometheus.Desc) { ch <- b.count; ch <- b.age }

// Collect implements prometheus.Collector; a failed measurement is reported
// as an invalid metric (the scrape shows the error) rather than a zero.
func (b *Backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := b.measure(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(b.count, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(b.count, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(b.age, prometheus.GaugeValue, oldest.Seconds())
}

// Prefix starts the name of every metric of ours (the Go and process
// collectors keep their standard names).
const Prefix = "seckill_"

// ForActivity is where a workload of one activity registers its metrics:
// every name gets Prefix and every series the activity label (the
// activity's id; bounded — never a user, request or reservation id). A
// workload started without an activity (by hand, serving every one) gets
// the prefix only.
func ForActivity(reg prometheus.Registerer, activity int64) prometheus.Registerer {
	if activity > 0 {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"activity": strconv.FormatInt(activity, 10)}, reg)
	}
	return prometheus.WrapRegistererWithPrefix(Prefix, reg)
}

// Registry is a fresh registry with the Go and process collectors.
func Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Health is what /readyz answers: ready once the worker has started its
// loop; Beat marks the loop alive for /healthz (a loop stuck longer than
// Stale is reported unhealthy, so the kubelet restarts it).
type Health struct {
	ready atomic.Bool
	last  atomic.Int64
	Stale time.Duration
}

// Ready marks the worker ready (a nil Health ignores it).
func (h *Health) Ready() {
	if h != nil {
		h.ready.Store(true)
		h.Beat()
	}
}

// Beat records that the worker's loop is turning (a nil Health ignores it).
func (h *Health) Beat() {
	if h != nil {
		h.last.Store(time.Now().UnixNano())
	}
}

func (h *Health) live() error {
	if h.Stale <= 0 || !h.ready.Load() {
		return nil
	}
	if age := time.Since(time.Unix(0, h.last.Load())); age > h.Stale {
		return fmt.Errorf("loop has not turned for %s", age.Round(time.Second))
	}
	return nil
}

// Handler serves /metrics, /healthz and /readyz.
func Handler(reg *prometheus.Registry, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := h.live(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Server timeouts of every HTTP server of the workloads: a client that
// sends its headers or body slowly, reads the answer slowly or holds an idle
// connection cannot keep a goroutine and a connection for ever.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second // headers and body
	WriteTimeout      = 30 * time.Second // from the end of the headers to the end of the answer
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 16 << 10
)

// NewServer is an http.Server with the workloads' timeouts and header limit.
func NewServer(addr string, handler http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes}
}

// Serve runs the handler on addr until ctx ends ("" or "0": not served).
func Serve(ctx context.Context, addr string, handler http.Handler) error {
	if addr == "" || addr == "0" {
		<-ctx.Done()
		return nil
	}
	srv := NewServer(addr, handler)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serving metrics on %s: %w", addr, err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
