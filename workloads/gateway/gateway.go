// Package gateway is the public HTTP API (/v1): it reserves with the Redis
// script, sends the order-create message at once with its fixed id, and
// answers QUEUED — never "order created". Every refusal carries a
// machine-readable code; a refused request writes nothing.
package gateway

import (
	"bytes"
	"context"
	"embed"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/sqlfile"
	"github.com/seckill/seckill-operator/workloads/states"
	"github.com/seckill/seckill-operator/workloads/tokens"
	"github.com/seckill/seckill-operator/workloads/tracing"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var qReservationStatus = sqlfile.Must(sqlFiles, "reservation_status")

// Codes of the API.
const (
	CodeQueued             = "QUEUED"
	CodeSoldOut            = "SOLD_OUT"
	CodeAlreadyPurchased   = "ALREADY_PURCHASED"
	CodeNotStarted         = "ACTIVITY_NOT_STARTED"
	CodePaused             = "ACTIVITY_PAUSED"
	CodeEnded              = "ACTIVITY_ENDED"
	CodeInvalid            = "INVALID_REQUEST"
	CodeUnauthenticated    = "UNAUTHENTICATED"
	CodeRateLimited        = "RATE_LIMITED"
	CodeServiceUnavailable = "SERVICE_UNAVAILABLE"
	CodeNotFound           = "NOT_FOUND"

	// What GET /v1/reservations/{id} answers once the reservation moved on
	// (QUEUED while it has not).
	CodeOrderCreated  = "ORDER_CREATED"
	CodeOrderRejected = "ORDER_REJECTED"
	CodeCompensated   = "COMPENSATED"
	CodeCancelled     = "CANCELLED"
	CodeManualReview  = "MANUAL_REVIEW"
)

// statusCodes maps a reservation's status (Redis projection or PostgreSQL)
// to the code GET answers; a status not listed is still in progress (QUEUED).
// A reservation's states end at its order (design.md#states): whether the order
// was then paid is the order's state, not the reservation's, so a paid
// order's reservation answers ORDER_CREATED (a cancelled one CANCELLED).
var statusCodes = map[string]string{
	string(states.ReservationOrderCreated): CodeOrderCreated, string(states.ReservationOrderRejected): CodeOrderRejected,
	string(states.ReservationCompensating): CodeOrderRejected, string(states.ReservationCompensated): CodeCompensated,
	string(states.ReservationCancelled): CodeCancelled, string(states.ReservationManualReview): CodeManualReview,
}

// StatusCode is the code GET answers for a reservation status.
func StatusCode(status string) string {
	if c, ok := statusCodes[status]; ok {
		return c
	}
	return CodeQueued
}

var httpStatus = map[string]int{
	CodeQueued: http.StatusAccepted, CodeSoldOut: http.StatusConflict, CodeAlreadyPurchased: http.StatusConflict,
	CodeNotStarted: http.StatusForbidden, CodePaused: http.StatusForbidden, CodeEnded: http.StatusGone,
	CodeInvalid: http.StatusBadRequest, CodeUnauthenticated: http.StatusUnauthorized,
	CodeRateLimited: http.StatusTooManyRequests, CodeServiceUnavailable: http.StatusServiceUnavailable,
	CodeNotFound:     http.StatusNotFound,
	CodeOrderCreated: http.StatusOK, CodeOrderRejected: http.StatusOK, CodeCompensated: http.StatusOK,
	CodeCancelled: http.StatusOK, CodeManualReview: http.StatusOK,
}

// Sender sends an order-create message (the mq.Producer).
type Sender interface {
	Send(ctx context.Context, m mq.Message) (string, error)
}

// Reconnector is a Sender that can start a fresh client (the
// mq.Producer): when the entry breaker opens, the gateway asks for one,
// and closes the breaker as soon as it is in (fresh) — a broker restart
// breaks the old client's session, so a trial on it every cooldown would
// keep refusing buyers after the broker is back.
type Reconnector interface {
	Reconnect(fresh func())
}

// Config of a gateway.
type Config struct {
	ActivityID int64
	// SKUs maps sku id to its number of Redis buckets.
	SKUs  map[int64]int
	Topic string
	// Tokens verifies the bearer tokens; when nil, TokenKey is its one
	// HS256 key (under tokens.DefaultKID).
	Tokens           *tokens.Verifier
	TokenKey         []byte
	InsecureDevUsers bool // trust X-User-ID (dev only; off by default)
	BusinessDeadline time.Duration
	SendGrace        time.Duration // when the scanner first looks at an unsent reservation
	RequestTTL       time.Duration
	SendAttempts     int
	SendTimeout      time.Duration
	// ResendAfter: a sent message whose reservation PostgreSQL has not
	// decided after this long (doubling with each send) is sent again by
	// the send scanner with the same id — the broker's acknowledgement does
	// not promise a delivery (a consumer that died with a long poll in
	// flight can take a message away for minutes). 0: never.
	ResendAfter time.Duration
	// SendWorkers, when positive, answers QUEUED as soon as Redis holds the
	// reservation and sends its message from this many workers (sendq.go);
	// 0 sends in the request, before the answer. SendQueue bounds the
	// reservations waiting for a worker (default 64 × SendWorkers); a full
	// queue sends in the request.
	SendWorkers   int
	SendQueue     int
	RatePerSecond int // 0: no limit
	// StuckAfter is how long the entry breaker may stay open while Redis and
	// the broker answer before /healthz reports the process unhealthy (so
	// that it is restarted): default 60 s.
	StuckAfter time.Duration
	// SoldOutHold is how long a SKU found empty in every bucket is answered
	// SOLD_OUT without asking its other buckets again (its own bucket is
	// still asked): default 200 ms. A unit given back meanwhile is sold
	// after it.
	SoldOutHold time.Duration
	// MoveMax bounds the units one stock move takes from a sibling bucket
	// (it takes half the sibling's stock, rounded up): default 64.
	MoveMax int
	// BrokerReachable, when set, tells /healthz whether the broker answers
	// (e.g. a TCP connect to its endpoint).
	BrokerReachable func(context.Context) error
	// UserLimit is how many reservation requests one user may send per
	// UserWindow, counted in Redis so that every replica shares it (0: none).
	UserLimit  int
	UserWindow time.Duration
	// StatusPerSecond bounds the status endpoint's requests per second in
	// this process (0: unlimited).
	StatusPerSecond int
	// ReserveLanes, when > 0, sends concurrent reservations to Redis in
	// pipelines of at most ReserveBatch (default 64), this many at a time
	// (redisstore.ReserveBatcher); 0 runs each reservation on its own.
	ReserveLanes int
	ReserveBatch int
	// Failpoint, when set, is called at after_redis_reserve and
	// after_mq_send_before_redis_mark (design.md#failpoints; test builds only).
	Failpoint func(name string) error
}

// Server is the gateway.
type Server struct {
	cfg     Config
	redis   *redisstore.Store
	pg      *pgxpool.Pool
	sender  Sender
	ring    *ids.Keyring
	breaker *Breaker
	limiter *rate.Limiter
	// statusLimiter bounds the status endpoint.
	statusLimiter *rate.Limiter
	stock         *borrower
	log           *slog.Logger
	now           func() time.Time
	reg           *prometheus.Registry
	m             gatewayMetrics
	// draining: shutdown began; readiness fails so that the Service stops
	// routing here while the requests already on their way are answered.
	draining atomic.Bool
	sendq    *sendQueue // nil: sends in the request
	reserver reserver   // the store, or its batcher
	tokens   *tokens.Verifier
	batcher  *redisstore.ReserveBatcher
	acks     *redisstore.AckBatcher // nil: each send acknowledged alone
}

// reserver runs the reserve script: the store itself or its batcher.
type reserver interface {
	Reserve(ctx context.Context, r redisstore.ReserveRequest) (redisstore.ReserveResult, error)
}

// Drain makes /readyz answer 503 from now on; requests are still served.
func (s *Server) Drain() { s.draining.Store(true) }

// Close waits until every reservation queued for sending is sent; call it
// after the HTTP server stopped (a later request sends in the request).
func (s *Server) Close() {
	if s.sendq != nil {
		s.sendq.close()
	}
	if s.batcher != nil {
		s.batcher.Close()
	}
	if s.acks != nil {
		s.acks.Close()
	}
}

type gatewayMetrics struct {
	requests    *prometheus.CounterVec
	byCode      map[string]prometheus.Counter // requests' children, looked up once
	created     prometheus.Counter
	sendUnknown prometheus.Counter
	latency     prometheus.Histogram
	moved       *prometheus.CounterVec
}

// New builds a gateway.
func New(cfg Config, rs *redisstore.Store, pg *pgxpool.Pool, sender Sender, ring *ids.Keyring, log *slog.Logger) *Server {
	if cfg.SendAttempts < 1 {
		cfg.SendAttempts = 2
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = time.Second
	}
	if cfg.SoldOutHold <= 0 {
		cfg.SoldOutHold = 200 * time.Millisecond
	}
	if cfg.MoveMax < 1 {
		cfg.MoveMax = 64
	}
	// Every series carries the seckill_ prefix and the activity label; the
	// Go and process collectors keep their standard names.
	gather := metrics.Registry()
	reg := metrics.ForActivity(gather, cfg.ActivityID)
	s := &Server{cfg: cfg, redis: rs, pg: pg, sender: sender, ring: ring, log: log, now: time.Now, reg: gather,
		breaker: NewBreaker(5, 5*time.Second), limiter: newLimiter(cfg.RatePerSecond), statusLimiter: newLimiter(cfg.StatusPerSecond)}
	if rc, ok := sender.(Reconnector); ok {
		s.breaker.OnOpen(func() {
			log.Warn("entry breaker open: starting a fresh broker client, again each second until the broker answers")
			rc.Reconnect(func() {
				log.Info("a fresh broker client started: entry breaker closed")
				s.breaker.Reset()
			})
		})
	}
	s.m = gatewayMetrics{
		requests:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_requests_total", Help: "Reservation requests by answer code."}, []string{"code"}),
		created:     prometheus.NewCounter(prometheus.CounterOpts{Name: "reservation_created_total", Help: "Redis reservations created."}),
		sendUnknown: prometheus.NewCounter(prometheus.CounterOpts{Name: "reservation_send_unknown_total", Help: "Immediate sends whose outcome is unknown (left to the scanner)."}),
		latency:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_reserve_seconds", Help: "Reserve request latency.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		moved:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stock_moved_units_total", Help: "Units moved into an empty bucket from a sibling, by SKU."}, []string{"sku"}),
	}
	s.m.byCode = make(map[string]prometheus.Counter, len(httpStatus))
	for code := range httpStatus {
		s.m.byCode[code] = s.m.requests.WithLabelValues(code)
	}
	s.stock = &borrower{redis: rs, hold: cfg.SoldOutHold, max: cfg.MoveMax, moved: s.m.moved, soldOut: map[int64]time.Time{}, recheck: map[int64]time.Time{}}
	reg.MustRegister(s.m.requests, s.m.created, s.m.sendUnknown, s.m.latency, s.m.moved)
	s.tokens = cfg.Tokens
	if s.tokens == nil {
		s.tokens = tokens.NewVerifier()
		if len(cfg.TokenKey) > 0 {
			if err := s.tokens.AddHMAC(tokens.DefaultKID, cfg.TokenKey); err != nil {
				log.Error("token key refused: every token will be", "error", err)
			}
		}
	}
	s.reserver = rs
	if cfg.ReserveLanes > 0 {
		if cfg.ReserveBatch < 1 {
			s.cfg.ReserveBatch = 64
		}
		s.batcher = redisstore.NewReserveBatcher(rs, cfg.ReserveLanes, s.cfg.ReserveBatch)
		s.reserver = s.batcher
		b := s.batcher
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_reserve_round_trips_total",
			Help: "Round trips to Redis carrying reservations (a pipeline is one)."}, func() float64 { n, _ := b.Stats(); return float64(n) }))
	}
	if cfg.SendWorkers > 0 {
		if cfg.SendQueue < 1 {
			s.cfg.SendQueue = 64 * cfg.SendWorkers
		}
		if cfg.ReserveLanes > 0 {
			// The workers' acknowledgements share round trips as the
			// reservations do.
			s.acks = redisstore.NewAckBatcher(rs, 1, s.cfg.ReserveBatch)
			a := s.acks
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_send_ack_round_trips_total",
				Help: "Round trips to Redis marking sent messages (a pipeline is one)."}, func() float64 { n, _ := a.Stats(); return float64(n) }))
		}
		s.sendq = newSendQueue(cfg.SendWorkers, s.cfg.SendQueue, s.send)
	}
	return s
}

//go:embed api/openapi.yaml
var openAPI []byte

// OpenAPI is the description of this API that GET /openapi.yaml serves.
func OpenAPI() []byte { return openAPI }

// Route is one pattern the gateway serves.
type Route struct{ Method, Path string }

// Routes lists what Handler serves (the OpenAPI description lists the same).
func Routes() []Route {
	return []Route{
		{"POST", "/v1/activities/{activity}/skus/{sku}/reservations"},
		{"GET", "/v1/reservations/{id}"},
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/openapi.yaml"},
	}
}

// Codes maps every code the API answers to its HTTP status.
func Codes() map[string]int {
	out := make(map[string]int, len(httpStatus))
	for k, v := range httpStatus {
		out[k] = v
	}
	return out
}

// MetricsHandler serves /metrics, /healthz and /readyz on the metrics port:
// the metrics are not part of the public API and never on its Service.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", s.healthy)
	mux.HandleFunc("GET /readyz", s.ready)
	return mux
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	handlers := map[string]http.Handler{
		"POST /v1/activities/{activity}/skus/{sku}/reservations": http.HandlerFunc(s.reserve),
		"GET /v1/reservations/{id}":                              http.HandlerFunc(s.status),
		"GET /healthz":                                           http.HandlerFunc(s.healthy),
		"GET /readyz":                                            http.HandlerFunc(s.ready),
		"GET /openapi.yaml": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(openAPI)
		}),
	}
	mux := http.NewServeMux()
	for _, r := range Routes() {
		mux.Handle(r.Method+" "+r.Path, handlers[r.Method+" "+r.Path])
	}
	return mux
}

type answer struct {
	Code          string `json:"code"`
	Message       string `json:"message,omitempty"`
	ReservationID string `json:"reservation_id,omitempty"`
	Status        string `json:"status,omitempty"`
	OrderID       string `json:"order_id,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// Answers a busy sale gives to most requests, encoded once: after the sell
// out nearly every answer is SOLD_OUT.
var fixedAnswers = func() map[answer][]byte {
	m := map[answer][]byte{}
	for _, a := range []answer{
		{Code: CodeSoldOut, Message: "sold out"},
		{Code: CodeUnauthenticated, Message: "a valid bearer token is required"},
		{Code: CodeRateLimited, Message: "too many requests from this user, retry later with the same request_id"},
		{Code: CodeNotStarted, Message: "the sale has not started"},
		{Code: CodePaused, Message: "the sale is paused"},
		{Code: CodeEnded, Message: "the sale has ended"},
		{Code: CodeServiceUnavailable, Message: "order queue unavailable, retry later with the same request_id"},
	} {
		m[a] = encodeAnswer(a)
	}
	return m
}()

var jsonContentType = []string{"application/json"}

// retryAfter is the Retry-After of a 429 or 503 (seconds): the least a
// client waits before retrying. A crowd retrying faster keeps an outage
// going (the chaos run's buyers at a fixed 200 ms kept the breaker open and
// both cores busy answering them, long after the broker was back).
var retryAfter = []string{"1"}

func encodeAnswer(a answer) []byte {
	b, err := json.Marshal(a)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return append(b, '\n')
}

func (s *Server) write(w http.ResponseWriter, a answer) {
	body, ok := fixedAnswers[a]
	if !ok {
		body = encodeAnswer(a)
	}
	w.Header()["Content-Type"] = jsonContentType
	status := httpStatus[a.Code]
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header()["Retry-After"] = retryAfter
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) //nolint:gosec // JSON from json.Marshal (HTML escaped), served as application/json
}

// ReservationRequest is the POST body.
type ReservationRequest struct {
	RequestID uuid.UUID `json:"request_id"`
}

// MaxBodyBytes bounds the POST body.
const MaxBodyBytes = 1024

// ParseReservationRequest parses the POST body strictly.
func ParseReservationRequest(body []byte) (ReservationRequest, error) {
	var r ReservationRequest
	if len(body) > MaxBodyBytes {
		return r, fmt.Errorf("body larger than %d bytes", MaxBodyBytes)
	}
	// The body every client sends, read without a decoder; anything else
	// (spaces, other fields, escapes) goes through the strict decoder.
	const prefix, suffix = `{"request_id":"`, `"}`
	if len(body) == len(prefix)+36+len(suffix) && string(body[:len(prefix)]) == prefix && string(body[len(body)-len(suffix):]) == suffix {
		if id, err := uuid.ParseBytes(body[len(prefix) : len(prefix)+36]); err == nil && id != uuid.Nil {
			r.RequestID = id
			return r, nil
		}
	}
	return parseStrict(body)
}

// parseStrict decodes a POST body: one object, no unknown field, nothing after it.
func parseStrict(body []byte) (ReservationRequest, error) {
	var r ReservationRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("body: %w", err)
	}
	if dec.More() {
		return r, errors.New("body: trailing data")
	}
	if r.RequestID == uuid.Nil {
		return r, errors.New("request_id is required")
	}
	return r, nil
}

func (s *Server) user(r *http.Request) (int64, error) {
	if s.cfg.InsecureDevUsers {
		if v := r.Header.Get("X-User-ID"); v != "" {
			u, err := strconv.ParseInt(v, 10, 64)
			if err != nil || u <= 0 {
				return 0, ErrUnauthenticated
			}
			return u, nil
		}
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, ErrUnauthenticated
	}
	return s.tokens.Verify(token, s.now())
}

func (s *Server) reserve(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	ctx := r.Context()
	if tp := r.Header.Get(TraceParentHeader); TraceID(tp) != "" { // only a valid caller's context is joined
		ctx = tracing.FromTraceparent(ctx, tp)
	}
	ctx, span := tracing.Start(ctx, tracing.SpanReserve, trace.SpanKindServer)
	a := s.doReserve(ctx, r)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrResult.String(a.Code))
	}
	span.End()
	if c, ok := s.m.byCode[a.Code]; ok {
		c.Inc()
	} else {
		s.m.requests.WithLabelValues(a.Code).Inc()
	}
	s.m.latency.Observe(time.Since(start).Seconds())
	s.write(w, a)
}

func (s *Server) doReserve(ctx context.Context, r *http.Request) answer {
	user, err := s.user(r)
	if err != nil {
		return answer{Code: CodeUnauthenticated, Message: "a valid bearer token is required"}
	}
	activity, err1 := strconv.ParseInt(r.PathValue("activity"), 10, 64)
	sku, err2 := strconv.ParseInt(r.PathValue("sku"), 10, 64)
	buckets, known := s.cfg.SKUs[sku]
	if err1 != nil || err2 != nil || activity != s.cfg.ActivityID || !known {
		return answer{Code: CodeInvalid, Message: "unknown activity or sku"}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return answer{Code: CodeInvalid, Message: "unreadable body"}
	}
	req, err := ParseReservationRequest(body)
	if err != nil {
		return answer{Code: CodeInvalid, Message: err.Error()}
	}
	if !s.limiter.AllowN(s.now(), 1) {
		return answer{Code: CodeRateLimited, Message: "too many requests, retry with the same request_id"}
	}
	now := s.now()
	allowed, ticket := s.breaker.Allow()
	if !allowed {
		return answer{Code: CodeServiceUnavailable, Message: "order queue unavailable, retry later with the same request_id"}
	}
	// A half-open trial that ends without a send (sold out, a replay, an
	// error) is given back at once; a send records its outcome itself.
	sent := false
	defer func() {
		if !sent {
			s.breaker.Release(ticket)
		}
	}()
	slot := redisstore.Slot{ActivityID: activity, SKUID: sku, Bucket: redisstore.BucketFor(user, buckets)}
	rid := s.ring.ReservationID(ids.ReservationKey{ActivityID: activity, SKUID: sku, UserID: user, RequestID: req.RequestID})
	mid, err := s.ring.MessageID(rid, 1)
	if err != nil {
		return answer{Code: CodeServiceUnavailable, Message: "id derivation failed"}
	}
	now = time.UnixMilli(now.UnixMilli()) // the precision the reservation records
	rr := redisstore.ReserveRequest{Slot: slot, ReservationID: rid, MessageID: mid, RequestID: req.RequestID, UserID: user,
		Now: now, BusinessDeadline: now.Add(s.cfg.BusinessDeadline), SendDue: now.Add(s.cfg.SendGrace),
		RequestTTL: s.cfg.RequestTTL, SchemaVersion: 1, KeyVersion: s.ring.Current(),
		UserLimit: s.cfg.UserLimit, UserWindow: s.cfg.UserWindow}
	rr.TraceID, rr.SpanID = tracing.IDs(ctx) // the reserve span's, or the caller's when not exporting
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.AttrReservation.String(rid.String()), tracing.AttrSKU.Int64(sku))
	}
	res, err := s.reserver.Reserve(ctx, rr)
	rr.UserLimit = 0 // the tries below are this request's, counted once
	// The user's bucket is empty: stock moves to it from a sibling that has
	// some, and the reservation runs in the same transaction as the units'
	// arrival, so SOLD_OUT means the SKU is sold out, not this bucket, and
	// every move sells the mover a unit. When every sibling is empty the
	// own bucket is asked once more (a concurrent move may have filled it)
	// before the SKU is held as sold out; when units are still left
	// somewhere, the buyer borrows again. The tries are bounded (one round
	// per bucket): a move may find its source emptied by another mover
	// first, and a buyer whose tries all lose is told 503, never SOLD_OUT.
	settled := buckets <= 1 // SOLD_OUT is known to mean the SKU: held, or every bucket seen empty
	left := stockUnknown    // what the last look at every bucket found
	for try := 0; err == nil && res.Code == redisstore.ReserveSoldOut && buckets > 1 && try < buckets; try++ {
		moved, mres, merr := s.stock.borrow(ctx, rr, buckets, now)
		if merr != nil {
			s.log.Warn("moving stock between buckets", "sku", sku, "bucket", slot.Bucket, "error", merr)
			err = merr // the reservation may have run with the moved units: unknown
			break
		}
		if moved < 0 {
			settled = true // held as sold out
			break
		}
		if moved > 0 {
			res = mres
			continue
		}
		res, err = s.reserver.Reserve(ctx, rr)
		if err != nil || res.Code != redisstore.ReserveSoldOut {
			break
		}
		// Held as sold out only when no unit is left anywhere: units in
		// transit between two buckets (another gateway's move half done)
		// land in a moment, and holding then would refuse the last buyers
		// while those units stay unsold. Units left (other buyers took the
		// ones moved here between the tries, or a move is half done and
		// its rest lands in a sibling): borrow again.
		left = s.stock.look(ctx, slot, buckets)
		if left == stockGone {
			s.stock.soldOutAt(sku, now)
			settled = true
		}
		if left != stockSome {
			break
		}
	}
	if err == nil && res.Code == redisstore.ReserveSoldOut && !settled && left == stockUnknown {
		left = s.stock.look(ctx, slot, buckets)
	}
	if err == nil && res.Code == redisstore.ReserveSoldOut && !settled && left != stockGone {
		// The tries ran out while other buyers took each unit moved here,
		// or the last units are in transit: SOLD_OUT would be false. The
		// buyer retries.
		return answer{Code: CodeServiceUnavailable, Message: "units are moving between buckets; retry with the same request_id"}
	}
	if err != nil {
		// Unknown: the script may have run. The client retries with the same
		// request_id and gets the same reservation.
		s.log.Warn("reserve failed", append([]any{logs.RequestID, req.RequestID}, logs.Err(err)...)...)
		return answer{Code: CodeServiceUnavailable, Message: "retry with the same request_id"}
	}
	switch res.Code {
	case redisstore.ReserveOK:
		s.m.created.Inc()
		if s.log.Enabled(ctx, slog.LevelDebug) { // one line per reservation: debug
			s.log.Debug("reservation created", append(reservationFields(rr), logs.Event, logs.EventReservationCreated)...)
		}
		if err := s.failpoint("after_redis_reserve"); err != nil {
			return answer{Code: CodeServiceUnavailable, Message: "retry with the same request_id"}
		}
		sent = true
		if s.sendq == nil || !s.sendq.offer(outgoing{rr, ticket}) {
			s.send(ctx, outgoing{rr, ticket})
		}
		return answer{Code: CodeQueued, ReservationID: rid.String(), Message: "accepted, the order is being created"}
	case redisstore.ReserveReplayed:
		return answer{Code: CodeQueued, ReservationID: res.ReservationID, Status: res.Status}
	case redisstore.ReserveSoldOut:
		return answer{Code: CodeSoldOut, Message: "sold out"}
	case redisstore.ReserveRateLimited:
		return answer{Code: CodeRateLimited, Message: "too many requests from this user, retry later with the same request_id"}
	case redisstore.ReserveAlreadyPurchased:
		return answer{Code: CodeAlreadyPurchased, Message: "one per customer", ReservationID: res.ReservationID}
	case redisstore.ReserveWindowClosed:
		switch res.Reason {
		case CodeNotStarted:
			return answer{Code: CodeNotStarted, Message: "the sale has not started"}
		case CodePaused:
			return answer{Code: CodePaused, Message: "the sale is paused"}
		case CodeEnded:
			return answer{Code: CodeEnded, Message: "the sale has ended"}
		}
	}
	return answer{Code: CodeServiceUnavailable, Message: "the sale is not ready: " + res.Reason}
}

// ackSend marks rr's message sent in Redis (send_ack.lua), in the next
// batch of acknowledgements when there is a batcher.
func (s *Server) ackSend(ctx context.Context, rr redisstore.ReserveRequest, now time.Time) error {
	if s.acks != nil {
		_, err := s.acks.AckSend(ctx, redisstore.SendAck{Slot: rr.Slot, ReservationID: rr.ReservationID, Owned: rr.SendDue.UnixMilli(),
			Now: now, ResendAfter: s.cfg.ResendAfter})
		return err
	}
	_, err := s.redis.AckSend(ctx, rr.Slot, rr.ReservationID, rr.SendDue.UnixMilli(), now, s.cfg.ResendAfter)
	return err
}

func (s *Server) failpoint(name string) error {
	if s.cfg.Failpoint == nil {
		return nil
	}
	return s.cfg.Failpoint(name)
}

// send sends the order-create message at once, a bounded number of times
// with the same id; if the outcome stays unknown the reservation is marked
// UNKNOWN and left to the scanner — the user is QUEUED either way.
func (s *Server) send(ctx context.Context, o outgoing) {
	rr := o.rr
	ctx, span := tracing.Start(tracing.FromTraceparent(ctx, tracing.Compose(rr.TraceID, rr.SpanID)), tracing.SpanSend, trace.SpanKindProducer)
	if span.IsRecording() { // the ids' strings only for a span that keeps them
		span.SetAttributes(tracing.AttrReservation.String(rr.ReservationID.String()), tracing.AttrMessage.String(rr.MessageID.String()))
	}
	var err error
	defer func() { tracing.End(span, err) }()
	msg := events.NewOrderCreateRequested(rr.ReservationID, rr.MessageID, rr.RequestID, rr.Slot.ActivityID, rr.Slot.SKUID,
		rr.UserID, rr.Slot.Bucket, rr.Now.UnixMilli(), rr.BusinessDeadline.UnixMilli(), rr.TraceID)
	// The body names the reservation's (reserve) span, as the scanner's
	// resend rebuilds it from Redis: every send of one message id is the
	// same payload (the inbox compares their hashes). The send span rides
	// in the traceparent property.
	msg.Trace.SpanID = rr.SpanID
	body, err := msg.Marshal()
	if err != nil {
		// Not the broker's failure: the scanner sends it (and fails the
		// same way, visibly) with the same id.
		s.breaker.Release(o.ticket)
		s.log.Error("order-create message not encoded; left to the scanner", append(reservationFields(rr), logs.Err(err)...)...)
		return
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("order-create send started", append(reservationFields(rr), logs.Event, logs.EventReservationSendStarted)...)
	}
	for i := 0; i < s.cfg.SendAttempts; i++ {
		sctx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
		_, err = s.sender.Send(sctx, mq.Message{Topic: s.cfg.Topic, MessageID: rr.MessageID.String(),
			Key: rr.ReservationID.String(), Tag: events.TypeOrderCreateRequested, Body: body, Properties: tracing.Properties(ctx)})
		cancel()
		if err == nil {
			break
		}
	}
	now := s.now()
	s.breaker.Record(o.ticket, err == nil)
	bg := context.WithoutCancel(ctx)
	if err == nil {
		if s.failpoint("after_mq_send_before_redis_mark") != nil {
			return
		}
		if aerr := s.ackSend(bg, rr, now); aerr != nil {
			s.log.Warn("sent but not acked; the scanner resends with the same id", append(reservationFields(rr), logs.Err(aerr)...)...)
		}
		return
	}
	s.m.sendUnknown.Inc()
	s.log.Warn("send outcome unknown; left to the scanner", append(append(reservationFields(rr),
		logs.Event, logs.EventReservationSendUnknown, logs.AttemptCount, s.cfg.SendAttempts), logs.Err(err)...)...)
	if _, rerr := s.redis.RescheduleSend(bg, rr.Slot, rr.ReservationID, rr.SendDue.UnixMilli(), rr.SendDue, redisstore.MQUnknown, err.Error()); rerr != nil {
		// The entry stays due as reserved: the scanner sends it all the same.
		s.log.Warn("send state not recorded", append(reservationFields(rr), logs.Err(rerr)...)...)
	}
}

// reservationFields are the §12.1 fields of a reservation.
func reservationFields(rr redisstore.ReserveRequest) []any {
	return []any{logs.ReservationID, rr.ReservationID, logs.MessageID, rr.MessageID, logs.RequestID, rr.RequestID,
		logs.TraceID, rr.TraceID, logs.SKUID, rr.Slot.SKUID, logs.UserID, rr.UserID}
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if !s.statusLimiter.AllowN(s.now(), 1) {
		s.write(w, answer{Code: CodeRateLimited, Message: "too many status requests, retry later"})
		return
	}
	user, err := s.user(r)
	if err != nil {
		s.write(w, answer{Code: CodeUnauthenticated, Message: "a valid bearer token is required"})
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.write(w, answer{Code: CodeInvalid, Message: "reservation id must be a UUID"})
		return
	}
	// Redis projection first: a user's reservation of a SKU lives in the
	// bucket the user is hashed to, so one read per SKU. A decided
	// reservation is answered from it; one it still holds open is asked of
	// PostgreSQL too, which may have decided it while the projection lags
	// (never QUEUED for an order PostgreSQL holds).
	var open *answer
	for sku, b := range s.cfg.SKUs {
		sl := redisstore.Slot{ActivityID: s.cfg.ActivityID, SKUID: sku, Bucket: redisstore.BucketFor(user, b)}
		h, err := s.redis.Reservation(r.Context(), sl, id)
		if err != nil || h == nil || h["user_id"] != strconv.FormatInt(user, 10) {
			continue
		}
		a := answer{Code: StatusCode(string(h.Status())), ReservationID: id.String(), Status: string(h.Status()), OrderID: h["order_id"], Reason: h["reason_code"]}
		if h.Status() != states.HashReserved || s.pg == nil {
			s.write(w, a)
			return
		}
		open = &a
		break
	}
	// PostgreSQL, the authority, when Redis does not have it or holds it open.
	if s.pg != nil {
		var st string
		var owner int64
		var orderID *uuid.UUID
		var reason *string
		err := s.pg.QueryRow(r.Context(), qReservationStatus, id).Scan(&st, &owner, &orderID, &reason)
		if err == nil && owner == user && (open == nil || st != string(states.ReservationReserved)) {
			a := answer{Code: StatusCode(st), ReservationID: id.String(), Status: st}
			if orderID != nil {
				a.OrderID = orderID.String()
			}
			if reason != nil {
				a.Reason = *reason
			}
			s.write(w, a)
			return
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) && open == nil {
			s.write(w, answer{Code: CodeServiceUnavailable, Message: "status unavailable, retry"})
			return
		}
	}
	if open != nil { // not yet decided in PostgreSQL (or it did not answer): still queued
		s.write(w, *open)
		return
	}
	s.write(w, answer{Code: CodeNotFound, Message: "no such reservation"})
}

// healthy is liveness: "this process can still do its job". A gateway whose
// breaker has refused reservations for longer than StuckAfter while Redis and
// the broker both answer is stuck, and says so; while a dependency is down
// it stays live (a restart would not help).
func (s *Server) healthy(w http.ResponseWriter, r *http.Request) {
	stuck := s.cfg.StuckAfter
	if stuck <= 0 {
		stuck = time.Minute
	}
	openFor := s.breaker.OpenFor(s.now())
	if openFor <= stuck {
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if s.redis.Client().Ping(ctx).Err() != nil || (s.cfg.BrokerReachable != nil && s.cfg.BrokerReachable(ctx) != nil) {
		w.WriteHeader(http.StatusOK)
		return
	}
	s.log.Error("refusing reservations while Redis and the broker answer: reporting unhealthy", "breaker_open_for", openFor.Round(time.Second).String())
	s.write(w, answer{Code: CodeServiceUnavailable, Message: fmt.Sprintf("entry breaker open for %s while its dependencies answer", openFor.Round(time.Second))})
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if err := s.redis.Client().Ping(ctx).Err(); err != nil || s.breaker.Open() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// newLimiter is a process-wide token bucket of perSecond requests, a
// second's worth of burst (0: unlimited).
func newLimiter(perSecond int) *rate.Limiter {
	if perSecond <= 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(perSecond), perSecond)
}
