package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/logs/logstest"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

var tokenKey = []byte("gateway-test-token-key-0123456789")

type failingSender struct{}

func (failingSender) Send(context.Context, mq.Message) (string, error) {
	return "", errors.New("broker unavailable")
}

type fixture struct {
	g        *gateway.Server
	srv      *httptest.Server
	rdb      redis.UniversalClient
	rs       *redisstore.Store
	activity int64
	slot     redisstore.Slot
	// logged is the gateway's log: JSON lines at debug (package logs).
	logged *logstest.Capture
	pool   *pgxpool.Pool
}

// events counts the §12.1 events logged; each event line names its reservation.
func (f *fixture) events(t *testing.T) map[string]int {
	t.Helper()
	lines := f.logged.Lines(t)
	for _, l := range lines {
		if _, ok := l[logs.Event]; ok {
			require.NotEmpty(t, l[logs.ReservationID], "%v", l)
		}
	}
	return logstest.Events(lines)
}

func newFixture(t *testing.T, stock int64, sender gateway.Sender, tune ...func(*gateway.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.RedisSingle(t)
	require.NoError(t, redisstore.LoadScripts(ctx, rdb))
	rs := redisstore.New(rdb)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	slot := redisstore.SKUSlot(activity, 7)
	_, _, err := rs.Provision(ctx, slot, stock, 1)
	require.NoError(t, err)
	require.NoError(t, rs.SetWindow(ctx, slot, redisstore.WindowActive))
	for _, sl := range redisstore.Slots(activity, 8, 4) { // SKU 8: four buckets
		_, _, err := rs.Provision(ctx, sl, stock, 1)
		require.NoError(t, err)
		require.NoError(t, rs.SetWindow(ctx, sl, redisstore.WindowActive))
	}
	if sender == nil {
		p, err := mq.NewProducer(testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), "seckill-test-normal")
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		sender = p
	}
	ring, _ := ids.NewKeyring(1, map[byte][]byte{1: []byte("gateway-test-id-key-0123456789abcd")})
	cfg := gateway.Config{ActivityID: activity, SKUs: map[int64]int{7: 1, 8: 4}, Topic: "seckill-test-normal",
		TokenKey: tokenKey, BusinessDeadline: 5 * time.Minute, SendGrace: 5 * time.Second, RequestTTL: time.Minute,
		SendAttempts: 1, SendTimeout: 2 * time.Second}
	for _, f := range tune {
		f(&cfg)
	}
	logged := &logstest.Capture{}
	pool := testenv.Database(t)
	g := gateway.New(cfg, rs, pool, sender, ring, logs.New(logged, "gateway", logs.Options{Level: slog.LevelDebug, ActivityID: activity}))
	t.Cleanup(g.Close) // after the server's (cleanups run last first): its send workers and batchers end
	srv := httptest.NewServer(conforming(t, g.Handler()))
	t.Cleanup(srv.Close)
	return &fixture{g: g, srv: srv, rdb: rdb, rs: rs, activity: activity, slot: slot, logged: logged, pool: pool}
}

type reply struct {
	status     int
	retryAfter string
	Code       string `json:"code"`
	RID        string `json:"reservation_id"`
	Status     string `json:"status"`
}

func (f *fixture) post(t *testing.T, path, auth, body string) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var r reply
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	r.status, r.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	return r
}

func (f *fixture) path() string {
	return "/v1/activities/" + formatInt(f.activity) + "/skus/7/reservations"
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

func bearer(user int64) string {
	return "Bearer " + gateway.SignToken(user, tokenKey, time.Now().Add(time.Hour))
}

func body(id uuid.UUID) string { return `{"request_id":"` + id.String() + `"}` }

func TestReserveAnswers(t *testing.T) {
	f := newFixture(t, 1, nil)
	req := ids.NewRandom()
	first := f.post(t, f.path(), bearer(1), body(req))
	require.Equal(t, http.StatusAccepted, first.status)
	require.Equal(t, gateway.CodeQueued, first.Code)
	require.NotEmpty(t, first.RID)
	// The immediate send succeeded: nothing left for the scanner.
	n, err := f.rdb.ZCard(context.Background(), f.slot.SendDue()).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	again := f.post(t, f.path(), bearer(1), body(req))
	require.Equal(t, gateway.CodeQueued, again.Code, "a replayed request gets the same reservation")
	require.Equal(t, first.RID, again.RID)

	require.Equal(t, gateway.CodeAlreadyPurchased, f.post(t, f.path(), bearer(1), body(ids.NewRandom())).Code)
	sold := f.post(t, f.path(), bearer(2), body(ids.NewRandom()))
	require.Equal(t, http.StatusConflict, sold.status)
	require.Equal(t, gateway.CodeSoldOut, sold.Code)

	// GET: the owner sees the status; another user does not.
	get := func(user int64, id string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/reservations/"+id, nil)
		req.Header.Set("Authorization", bearer(user))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var r reply
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r.Status
	}
	code, st := get(1, first.RID)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "RESERVED", st)
	code, _ = get(2, first.RID)
	require.Equal(t, http.StatusNotFound, code)
}

func TestRefusalsWriteNothing(t *testing.T) {
	f := newFixture(t, 5, nil)
	good := body(ids.NewRandom())
	cases := []struct {
		name, path, auth, body, code string
		status                       int
	}{
		{"no token", f.path(), "", good, gateway.CodeUnauthenticated, 401},
		{"bad signature", f.path(), "Bearer " + gateway.SignToken(1, []byte("other-key"), time.Now().Add(time.Hour)), good, gateway.CodeUnauthenticated, 401},
		{"expired token", f.path(), "Bearer " + gateway.SignToken(1, tokenKey, time.Now().Add(-time.Minute)), good, gateway.CodeUnauthenticated, 401},
		{"alg none", f.path(), "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIiwiZXhwIjo5OTk5OTk5OTk5fQ.", good, gateway.CodeUnauthenticated, 401},
		{"not json", f.path(), bearer(1), `{"request_id":`, gateway.CodeInvalid, 400},
		{"no request id", f.path(), bearer(1), `{}`, gateway.CodeInvalid, 400},
		{"bad request id", f.path(), bearer(1), `{"request_id":"x"}`, gateway.CodeInvalid, 400},
		{"unknown field", f.path(), bearer(1), `{"request_id":"` + ids.NewRandom().String() + `","qty":2}`, gateway.CodeInvalid, 400},
		{"oversized", f.path(), bearer(1), `{"request_id":"` + strings.Repeat("a", 2000) + `"}`, gateway.CodeInvalid, 400},
		{"unknown sku", "/v1/activities/" + formatInt(f.activity) + "/skus/9/reservations", bearer(1), good, gateway.CodeInvalid, 400},
		{"other activity", "/v1/activities/1/skus/7/reservations", bearer(1), good, gateway.CodeInvalid, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.post(t, c.path, c.auth, c.body)
			require.Equal(t, c.status, r.status)
			require.Equal(t, c.code, r.Code)
		})
	}
	counters, err := f.rs.ReadCounters(context.Background(), f.slot)
	require.NoError(t, err)
	require.Equal(t, int64(5), counters.Available, "no refused request wrote anything")
	require.Zero(t, counters.OpenReserved)

	// The window: paused and ended answer their own codes.
	require.NoError(t, f.rs.SetWindow(context.Background(), f.slot, redisstore.WindowPaused))
	require.Equal(t, gateway.CodePaused, f.post(t, f.path(), bearer(1), good).Code)
	require.NoError(t, f.rs.SetWindow(context.Background(), f.slot, redisstore.WindowEnded))
	r := f.post(t, f.path(), bearer(1), good)
	require.Equal(t, gateway.CodeEnded, r.Code)
	require.Equal(t, http.StatusGone, r.status)
	require.NoError(t, f.rs.SetWindow(context.Background(), f.slot, redisstore.WindowNotStarted))
	require.Equal(t, gateway.CodeNotStarted, f.post(t, f.path(), bearer(1), good).Code)
}

// design.md#faults row 2: while the broker keeps failing, reservations made stay
// QUEUED and are left to the scanner (mq_state UNKNOWN), and after the
// threshold the entry breaker refuses new ones before they touch Redis.
func TestBrokerFailuresOpenTheBreaker(t *testing.T) {
	f := newFixture(t, 100, failingSender{})
	for u := range 5 {
		r := f.post(t, f.path(), bearer(int64(100+u)), body(ids.NewRandom()))
		require.Equal(t, gateway.CodeQueued, r.Code, "the reservation is recorded; the scanner will send it")
		h, err := f.rs.Reservation(context.Background(), f.slot, uuid.MustParse(r.RID))
		require.NoError(t, err)
		require.Equal(t, "UNKNOWN", h["mq_state"])
	}
	r := f.post(t, f.path(), bearer(200), body(ids.NewRandom()))
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Equal(t, gateway.CodeServiceUnavailable, r.Code)
	require.Equal(t, "1", r.retryAfter, "a 503 tells the client how long to wait")
	c, err := f.rs.ReadCounters(context.Background(), f.slot)
	require.NoError(t, err)
	require.Equal(t, int64(5), c.OpenReserved, "the refused request wrote nothing")
	n, err := f.rdb.ZCard(context.Background(), f.slot.SendDue()).Result()
	require.NoError(t, err)
	require.Equal(t, int64(5), n, "every unsent reservation waits in send_due")
	seen := f.events(t)
	for _, e := range []string{logs.EventReservationCreated, logs.EventReservationSendStarted, logs.EventReservationSendUnknown} {
		require.Equal(t, 5, seen[e], "%s once per reservation: %v", e, seen)
	}
}

// reconnectingSender fails while the broker is "away"; Reconnect records
// the gateway's request for a fresh client and hands back fresh.
type reconnectingSender struct {
	away  atomic.Bool
	asked chan func()
}

func (s *reconnectingSender) Send(context.Context, mq.Message) (string, error) {
	if s.away.Load() {
		return "", errors.New("broker unavailable")
	}
	return "broker-id", nil
}

func (s *reconnectingSender) Reconnect(fresh func()) { s.asked <- fresh }

// A broker restart breaks the producer's client: when the breaker opens
// the gateway asks the producer for a fresh one, and closes the breaker as
// soon as it is in — buyers get QUEUED again at once, not after a cooldown
// and a trial on the broken client.
func TestBreakerClosesWhenAFreshBrokerClientIsIn(t *testing.T) {
	s := &reconnectingSender{asked: make(chan func(), 1)}
	s.away.Store(true)
	f := newFixture(t, 100, s)
	for u := range 5 {
		require.Equal(t, gateway.CodeQueued, f.post(t, f.path(), bearer(int64(500+u)), body(ids.NewRandom())).Code)
	}
	require.Equal(t, http.StatusServiceUnavailable, f.post(t, f.path(), bearer(600), body(ids.NewRandom())).status, "open")
	var fresh func()
	select {
	case fresh = <-s.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the open breaker did not ask the producer for a fresh client")
	}
	require.Equal(t, http.StatusServiceUnavailable, f.post(t, f.path(), bearer(601), body(ids.NewRandom())).status, "still open: no client yet")
	s.away.Store(false)
	fresh()
	r := f.post(t, f.path(), bearer(602), body(ids.NewRandom()))
	require.Equal(t, gateway.CodeQueued, r.Code, "closed at once, well inside the 5 s cooldown")
	h, err := f.rs.Reservation(context.Background(), f.slot, uuid.MustParse(r.RID))
	require.NoError(t, err)
	require.Equal(t, "PUBLISHED", h["mq_state"], "sent by the gateway itself")
}

// Liveness: a breaker open for longer than StuckAfter while Redis and the
// broker answer makes /healthz fail (the process should be restarted); while
// the broker does not answer, it stays live (a restart would not help).
func TestHealthzReportsAStuckBreaker(t *testing.T) {
	var brokerDown atomic.Bool
	f := newFixture(t, 100, failingSender{}, func(c *gateway.Config) {
		c.StuckAfter = time.Second
		c.BrokerReachable = func(context.Context) error {
			if brokerDown.Load() {
				return errors.New("connection refused")
			}
			return nil
		}
	})
	healthz := func() int {
		resp, err := http.Get(f.srv.URL + "/healthz")
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, healthz())
	for u := range 5 { // the threshold: the breaker opens
		require.Equal(t, gateway.CodeQueued, f.post(t, f.path(), bearer(int64(300+u)), body(ids.NewRandom())).Code)
	}
	require.Equal(t, http.StatusServiceUnavailable, f.post(t, f.path(), bearer(400), body(ids.NewRandom())).status)
	require.Equal(t, http.StatusOK, healthz(), "open for less than StuckAfter")
	time.Sleep(1100 * time.Millisecond)
	require.Equal(t, http.StatusServiceUnavailable, healthz(), "open past StuckAfter while everything answers")
	brokerDown.Store(true)
	require.Equal(t, http.StatusOK, healthz(), "the broker is away: a restart would not help")
}

// design.md#invariants at the entry: 1,000 concurrent requests of one user with
// different request ids → exactly one QUEUED, every other answer
// ALREADY_PURCHASED, Redis stock down by one.
func TestOneUserThousandRequests(t *testing.T) {
	f := newFixture(t, 100, nil)
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.post(t, f.path(), bearer(77), body(ids.NewRandom()))
			mu.Lock()
			codes[r.Code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, map[string]int{gateway.CodeQueued: 1, gateway.CodeAlreadyPurchased: 999}, codes)
	c, err := f.rs.ReadCounters(context.Background(), f.slot)
	require.NoError(t, err)
	require.Equal(t, int64(99), c.Available)
	require.Equal(t, int64(1), c.OpenReserved)
}

// GET of a bucketed SKU's reservation reads the one bucket its user is
// hashed to; nobody else sees it.
func TestStatusOfABucketedSKU(t *testing.T) {
	f := newFixture(t, 10, nil)
	path := "/v1/activities/" + formatInt(f.activity) + "/skus/8/reservations"
	for user := int64(100); user < 108; user++ {
		r := f.post(t, path, bearer(user), body(ids.NewRandom()))
		require.Equal(t, gateway.CodeQueued, r.Code)
		for _, who := range []int64{user, user + 1000} {
			req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/reservations/"+r.RID, nil)
			req.Header.Set("Authorization", bearer(who))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			var got reply
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
			_ = resp.Body.Close()
			if who == user {
				require.Equal(t, http.StatusAccepted, resp.StatusCode, "user %d", user)
				require.Equal(t, "RESERVED", got.Status)
			} else {
				require.Equal(t, http.StatusNotFound, resp.StatusCode)
			}
		}
	}
}

// GET of a reservation Redis still holds open asks PostgreSQL, which may
// have decided it while the projection lags: never QUEUED for an order
// PostgreSQL holds (issue 31, goal 7); not yet decided there, still QUEUED.
func TestStatusIsPostgreSQLsWhileTheProjectionLags(t *testing.T) {
	f := newFixture(t, 10, nil)
	get := func(user int64, rid string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/reservations/"+rid, nil)
		req.Header.Set("Authorization", bearer(user))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var got map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		return resp.StatusCode, got
	}
	const user = 501
	r := f.post(t, f.path(), bearer(user), body(ids.NewRandom()))
	require.Equal(t, gateway.CodeQueued, r.Code)
	code, got := get(user, r.RID)
	require.Equal(t, http.StatusAccepted, code, "no row in PostgreSQL yet: queued")
	require.Equal(t, "RESERVED", got["status"])

	_, err := f.pool.Exec(context.Background(), `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id,
		message_id, status, reserved_at, business_deadline) VALUES ($1, $2, $3, 7, $4, $5, 'RESERVED', now(), now() + interval '5 minutes')`,
		r.RID, ids.NewRandom(), f.activity, user, ids.NewRandom())
	require.NoError(t, err)
	code, got = get(user, r.RID)
	require.Equal(t, http.StatusAccepted, code, "recorded, not decided: still queued")
	require.Equal(t, "RESERVED", got["status"])

	order := ids.NewRandom()
	_, err = f.pool.Exec(context.Background(), `UPDATE inventory_reservation SET status = 'ORDER_CREATED', order_id = $2 WHERE reservation_id = $1`, r.RID, order)
	require.NoError(t, err)
	h, err := f.rs.Reservation(context.Background(), f.slot, uuid.MustParse(r.RID))
	require.NoError(t, err)
	require.Equal(t, "RESERVED", string(h.Status()), "Redis has not been told")
	code, got = get(user, r.RID)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ORDER_CREATED", got["status"])
	require.Equal(t, order.String(), got["order_id"])
	code, _ = get(user+1, r.RID)
	require.Equal(t, http.StatusNotFound, code, "nobody else's")
}

// Issue 12: buyers who all hash to one bucket still buy every unit of the
// SKU — the empty bucket borrows from its siblings — and SOLD_OUT is
// answered only once the whole SKU is sold; every bucket conserves stock
// and nothing stays in transit.
// Reservations one round trip each, and batched into pipelines
// (ReserveLanes): the same answers, the same stock.
func TestSkewedBuyersSellEveryUnit(t *testing.T) {
	for name, tune := range map[string]func(*gateway.Config){
		"one round trip each": func(*gateway.Config) {},
		"batched":             func(c *gateway.Config) { c.ReserveLanes, c.ReserveBatch = 2, 8 },
	} {
		t.Run(name, func(t *testing.T) {
			const perBucket, buyers = 10, 60 // 40 units in four buckets
			f := newFixture(t, perBucket, nil, tune)
			path := "/v1/activities/" + formatInt(f.activity) + "/skus/8/reservations"
			var users []int64
			for u := int64(1); len(users) < buyers; u++ {
				if redisstore.BucketFor(u, 4) == 0 {
					users = append(users, u)
				}
			}
			work := make(chan int64)
			var mu sync.Mutex
			codes := map[string]int{}
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for u := range work {
						// As the contract asks: a 503 ("units are moving between
						// buckets") is retried with the same request_id, after
						// a backoff (units in transit land when their mover's
						// second script runs, later on a busy machine).
						req := ids.NewRandom()
						r := f.post(t, path, bearer(u), body(req))
						for try := 1; r.Code == gateway.CodeServiceUnavailable && try <= 10; try++ {
							time.Sleep(time.Duration(try) * 10 * time.Millisecond)
							r = f.post(t, path, bearer(u), body(req))
						}
						mu.Lock()
						codes[r.Code]++
						mu.Unlock()
					}
				}()
			}
			for _, u := range users {
				work <- u
			}
			close(work)
			wg.Wait()
			require.Equal(t, map[string]int{gateway.CodeQueued: 4 * perBucket, gateway.CodeSoldOut: buyers - 4*perBucket}, codes)

			var total redisstore.Counters
			for _, sl := range redisstore.Slots(f.activity, 8, 4) {
				c, err := f.rs.ReadCounters(context.Background(), sl)
				require.NoError(t, err)
				require.Zero(t, c.Delta(), "bucket %d conserves stock: %+v", sl.Bucket, c)
				total = total.Add(c)
			}
			require.Zero(t, total.Available, "every unit sold")
			require.Zero(t, total.InTransit(), "no move left half done")
			require.Equal(t, int64(4*perBucket), total.OpenReserved)
			require.Equal(t, int64(4*perBucket), total.Initial)

			// A buyer of an emptied sibling bucket is told SOLD_OUT too.
			var other int64
			for u := int64(1); other == 0; u++ {
				if redisstore.BucketFor(u, 4) == 2 {
					other = u
				}
			}
			require.Equal(t, gateway.CodeSoldOut, f.post(t, path, bearer(other), body(ids.NewRandom())).Code)
		})
	}
}

// A unit given back to one bucket after the SKU was held as sold out is
// sold to a buyer of another bucket once the hold has passed.
func TestUnitGivenBackIsSoldFromAnyBucket(t *testing.T) {
	f := newFixture(t, 0, nil, func(c *gateway.Config) { c.SoldOutHold = 50 * time.Millisecond })
	path := "/v1/activities/" + formatInt(f.activity) + "/skus/8/reservations"
	var buyer int64
	for u := int64(1); buyer == 0; u++ {
		if redisstore.BucketFor(u, 4) == 1 {
			buyer = u
		}
	}
	require.Equal(t, gateway.CodeSoldOut, f.post(t, path, bearer(buyer), body(ids.NewRandom())).Code)
	// One unit appears in bucket 3 (a compensation gives it back there).
	ctx := context.Background()
	_, _, err := f.rs.Provision(ctx, redisstore.BucketSlot(f.activity, 8, 3), 1, 2)
	require.NoError(t, err)
	time.Sleep(60 * time.Millisecond)
	r := f.post(t, path, bearer(buyer), body(ids.NewRandom()))
	require.Equal(t, gateway.CodeQueued, r.Code)
}

// The per-user limit (in Redis, shared by replicas) answers 429 past the
// limit; the status endpoint has its own per-process limit.
func TestUserAndStatusLimits(t *testing.T) {
	f := newFixture(t, 5, nil, func(c *gateway.Config) { c.UserLimit, c.UserWindow, c.StatusPerSecond = 2, time.Minute, 1 })
	first := f.post(t, f.path(), bearer(1), body(ids.NewRandom()))
	require.Equal(t, gateway.CodeQueued, first.Code)
	require.Equal(t, gateway.CodeAlreadyPurchased, f.post(t, f.path(), bearer(1), body(ids.NewRandom())).Code)
	limited := f.post(t, f.path(), bearer(1), body(ids.NewRandom()))
	require.Equal(t, []any{http.StatusTooManyRequests, gateway.CodeRateLimited, "1"}, []any{limited.status, limited.Code, limited.retryAfter})
	require.Empty(t, first.retryAfter, "only 429 and 503 carry Retry-After")
	require.Equal(t, gateway.CodeQueued, f.post(t, f.path(), bearer(2), body(ids.NewRandom())).Code, "another user is not limited")

	status := func() int {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/reservations/"+first.RID, nil)
		req.Header.Set("Authorization", bearer(1))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusAccepted, status())
	require.Equal(t, http.StatusTooManyRequests, status())
}

// Units in transit between buckets (another gateway's move half done) are
// not "sold out": the buyer is told to retry and the SKU is not held, so a
// buyer right after the moves land gets a unit — the last buyers of a sale
// are not refused while units stay unsold.
func TestUnitsInTransitAreNotSoldOut(t *testing.T) {
	f := newFixture(t, 1, nil, func(c *gateway.Config) { c.SoldOutHold = time.Hour })
	ctx := context.Background()
	path := "/v1/activities/" + formatInt(f.activity) + "/skus/8/reservations"
	buyerOf := func(bucket int, skip int64) int64 {
		for u := skip + 1; ; u++ {
			if redisstore.BucketFor(u, 4) == bucket {
				return u
			}
		}
	}
	// Every bucket's one unit leaves for bucket 3 (bucket 3's for bucket 0),
	// and none has arrived yet.
	slots := redisstore.Slots(f.activity, 8, 4)
	for src, dst := range []int{3, 3, 3, 0} {
		n, _, err := f.rs.MoveOut(ctx, slots[src], ids.NewRandom(), dst, 1, time.Now())
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	}
	first := buyerOf(1, 0)
	require.Equal(t, gateway.CodeServiceUnavailable, f.post(t, path, bearer(first), body(ids.NewRandom())).Code,
		"nothing available this instant, but units remain: retry, never SOLD_OUT")
	// The moves land.
	_, err := f.rs.Settle(ctx, slots, 0, time.Now().Add(time.Minute))
	require.NoError(t, err)
	second := buyerOf(1, first)
	require.Equal(t, gateway.CodeQueued, f.post(t, path, bearer(second), body(ids.NewRandom())).Code, "the SKU was not held as sold out")
}
