package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/seckill/seckill-operator/hack/salekit"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

const (
	gatewayAddr = "127.0.0.1:28190"
	pprofAddr   = "127.0.0.1:28199"
	benchCreate = "seckill-bench-sale-create"
	benchEvents = "seckill-bench-sale-events"
	benchCancel = "seckill-bench-sale-cancel"
	sku         = int64(90001)
	// Latencies are recorded in microseconds, 1 µs … 10 min, 3 digits.
	histMax = int64(10 * time.Minute / time.Microsecond)
)

func newHist() *hdr.Histogram { return hdr.New(1, histMax, 3) }

func buildBinary(dir string) (string, error) { return salekit.Build(dir) }

// second is one second of the sale, for the plot.
type second struct {
	offered, queued int            // reservations offered (buyers' first requests), answered QUEUED
	retried         int            // requests sent again after a 503 (-retries)
	reserve         *hdr.Histogram // HTTP latency of those offered
	orders          int            // orders created in this second
	toOrder         *hdr.Histogram // reservation → order of the reservations of this second
	backlog         int64          // queued − orders at the end of this second
	sampled         bool           // backlog was read (not while PostgreSQL was frozen)
}

type saleResult struct {
	offered, answered  int           // buyers who sent, buyers with a final answer
	retried            int           // requests sent again after a 503 (-retries)
	lastAnswer         time.Duration // first request → the last final answer
	codes              map[string]int
	loadTook           time.Duration // first request → the last buyer's first answer
	settled            time.Duration // first request → last order (or the settle timeout)
	orders             int64
	reserve, toOrder   *hdr.Histogram
	seconds            []*second
	failed             []string
	checks             []check
	ceilings           ceilings
	start              time.Time     // the first request
	queuedAt           []time.Time   // when each QUEUED answer arrived
	faultToOrderMax    float64       // ms, the slowest order of a reservation made during the fault
	faultFrom, faultTo time.Time     // the fault's window (zero: none)
	gatewayCPU         time.Duration // the gateway's CPU time during the load
	redisCPU           time.Duration // Redis's CPU time during the load
}

type check struct {
	name string
	ok   bool
	got  string
}

func (r *saleResult) at(i int) *second {
	for len(r.seconds) <= i {
		r.seconds = append(r.seconds, &second{reserve: newHist(), toOrder: newHist()})
	}
	return r.seconds[i]
}

// sale runs one sale and returns what it measured.
func sale(ctx context.Context, c config, bin, logPath, profPath string) (*saleResult, error) {
	activity := time.Now().UnixMilli() % 1_000_000_000_000
	tokenKey := salekit.RandomHex(32)
	common := salekit.SaleEnv(activity, fmt.Sprintf("%d:%d", sku, c.buckets), tokenKey, gatewayAddr)
	for _, args := range [][]string{{"activity", "provision", "-stock", fmt.Sprintf("%d=%d", sku, c.stock), "-price", fmt.Sprintf("%d=9900", sku)},
		{"activity", "window", "-state", "ACTIVE", "-payment-window", "1h"}} {
		if out, err := salekit.Cmd(bin, common, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("seckill %s %s: %w\n%s", args[0], args[1], err, out)
		}
	}
	pool, err := pgxpool.New(ctx, salekit.Env("SECKILL_PG_DSN"))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// Every run starts where routine maintenance leaves the database: the
	// dead rows of earlier sales (and tests) vacuumed, so that runs compare.
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) event_outbox, consumer_inbox, inventory_reservation, orders, inventory_ledger, sku_inventory`); err != nil {
		return nil, fmt.Errorf("vacuuming before the sale: %w", err)
	}
	roles, err := salekit.NewRoles(bin, common, filepath.Dir(bin))
	if err != nil {
		return nil, err
	}
	defer roles.Close()
	rdb := redis.NewClient(salekit.RedisOptions())
	defer rdb.Close()
	rs := redisstore.New(rdb)

	logf, err := os.Create(logPath) //nolint:gosec // our report directory
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	var procs salekit.Processes
	defer procs.Stop()
	workloads := []string{"gateway", "relay", "projector", "compensator", "scanner"}
	consumers := make([]string, c.consumers)
	for i := range consumers {
		consumers[i] = "consumer"
	}
	if !c.ordersAfterLoad {
		workloads = append(workloads, consumers...)
	}
	// The sale's own topics and groups (hack/rocketmq/resources.txt): the
	// cancel timers of its orders fall due after the run, and on the
	// production topics they would reach the next sale's canceller.
	topics := map[string][]string{
		"gateway":   append([]string{"-create-topic", benchCreate}, strings.Fields(c.gatewayArgs)...),
		"scanner":   {"-create-topic", benchCreate},
		"consumer":  {"-create-topic", benchCreate, "-events-topic", benchEvents, "-cancel-topic", benchCancel, "-group", "seckill-bench-sale-consumer"},
		"relay":     {"-events-topic", benchEvents, "-cancel-topic", benchCancel},
		"projector": {"-events-topic", benchEvents, "-group", "seckill-bench-sale-projector"},
	}
	startAll := func(ws []string) error {
		for _, w := range ws {
			args := append([]string{w}, topics[w]...)
			env := roles.Env(w, common)
			if w != "gateway" {
				args = append(args, "-metrics-addr", "0")
			} else {
				env = append(env, strings.Fields(c.gatewayEnv)...)
				if c.profile {
					env = append(env, "SECKILL_PPROF_ADDR="+pprofAddr)
				}
			}
			if err := procs.Start(bin, env, logf, args...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := startAll(workloads); err != nil {
		return nil, err
	}
	if err := salekit.WaitHTTP("http://" + gatewayAddr + "/readyz"); err != nil {
		return nil, err
	}

	// The requests, made before the clock: a new user each, signed tokens.
	// A buyer is told apart in the results by its URL (?buyer=i, which the
	// gateway ignores), so that a 503 is retried with the buyer's own request.
	url := fmt.Sprintf("http://%s/v1/activities/%d/skus/%d/reservations?buyer=", gatewayAddr, activity, sku)
	targets := make([]vegeta.Target, c.requests)
	exp := time.Now().Add(time.Hour)
	for i := range targets {
		user := int64(70_000_000 + i)
		targets[i] = vegeta.Target{Method: http.MethodPost, URL: url + strconv.Itoa(i),
			Body: []byte(`{"request_id":"` + ids.NewRandom().String() + `"}`),
			Header: http.Header{"Authorization": {"Bearer " + gateway.SignToken(user, []byte(tokenKey), exp)},
				"Content-Type": {"application/json"}}}
	}
	// Open loop at -rate; at -rate 0 a closed loop of -concurrency clients,
	// each sending its next request when the last is answered: the gateway's
	// saturation throughput.
	// Each target is sent once: the pacer stops at -requests (vegeta's
	// static targeter would start over at the first, a replay counted as a
	// second QUEUED).
	pacer := firstN{p: vegeta.Rate{Freq: c.rate, Per: time.Second}, n: uint64(c.requests)}
	workers, maxWorkers := uint64(64), uint64(4096)
	dur := time.Duration(float64(c.requests) / float64(max(1, c.rate)) * float64(time.Second))
	if c.rate == 0 {
		pacer.p, dur = nil, 0
		workers, maxWorkers = uint64(c.concurrency), uint64(c.concurrency)
	}
	attacker := vegeta.NewAttacker(vegeta.Timeout(30*time.Second), vegeta.KeepAlive(true),
		vegeta.Workers(workers), vegeta.MaxWorkers(maxWorkers), vegeta.Connections(1024), vegeta.MaxBody(4096))

	r := &saleResult{codes: map[string]int{}, reserve: newHist(), toOrder: newHist()}
	var queued atomic.Int64
	start := time.Now()
	r.start = start
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var sampling sync.WaitGroup
	sampling.Add(1)
	backlog := map[int]int64{}
	go func() { // the backlog, each second
		defer sampling.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case now := <-t.C:
				var orders int64
				qctx, cancel := context.WithTimeout(sampleCtx, 900*time.Millisecond)
				err := pool.QueryRow(qctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, activity).Scan(&orders)
				cancel()
				if err == nil {
					backlog[int(now.Sub(start)/time.Second)-1] = queued.Load() - orders
				}
			}
		}
	}()
	profiled := make(chan error, 1)
	if c.profile { // the gateway's CPU, from a third into the load
		wait, length := dur/3, min(10*time.Second, max(time.Second, dur/3))
		if c.rate == 0 { // the length is not known: the sold-out phase, mostly
			wait, length = 2*time.Second, 8*time.Second
		}
		go func() { profiled <- profileGateway(ctx, wait, length, profPath) }()
	} else {
		profiled <- nil
	}
	faulted := make(chan error, 1)
	if c.fault != "" {
		go func() { faulted <- injectFault(c, &procs, dur/3, r) }()
	} else {
		faulted <- nil
	}
	cpu0, err := loadCPU(ctx, procs.Pid("gateway"), rdb)
	if err != nil {
		return nil, err
	}
	var answer struct {
		Code string `json:"code"`
	}
	// The results of the buyers' first requests and of their retries, in
	// one stream. pending holds one unit per result not yet counted and per
	// retry not yet answered: a retry is added before the result that
	// caused it is done, so the stream ends only when every buyer has a
	// final answer.
	results := make(chan *vegeta.Result, 1024)
	var pending sync.WaitGroup
	loadTook := make(chan time.Duration, 1)
	go func() {
		// No duration: the pacer ends the attack at the last request (a
		// duration could end it a request short).
		for res := range attacker.Attack(vegeta.NewStaticTargeter(targets...), pacer, 0, "sale") {
			pending.Add(1)
			results <- res
		}
		loadTook <- time.Since(start)
		pending.Wait()
		close(results)
	}()
	retries := newRetrier(targets, results)
	attempts := make([]int, c.requests) // retries sent, per buyer
	for res := range results {
		buyer, err := strconv.Atoi(res.URL[strings.LastIndexByte(res.URL, '=')+1:])
		if err != nil || buyer < 0 || buyer >= c.requests {
			return nil, fmt.Errorf("a result for no buyer: %q", res.URL)
		}
		s := r.at(int(res.Timestamp.Sub(start) / time.Second))
		if attempts[buyer] == 0 {
			r.offered++
			s.offered++
		} else {
			r.retried++
			s.retried++
		}
		us := max(1, min(histMax, res.Latency.Microseconds()))
		_ = r.reserve.RecordValue(us)
		_ = s.reserve.RecordValue(us)
		answer.Code = ""
		transport := res.Error != "" && res.Code == 0
		if !transport {
			_ = json.Unmarshal(res.Body, &answer)
			if answer.Code == "" {
				answer.Code = "HTTP_" + strconv.Itoa(int(res.Code))
			}
		}
		switch {
		case (transport || answer.Code == gateway.CodeServiceUnavailable) && attempts[buyer] < c.retries:
			attempts[buyer]++ // not final: the same request again
			pending.Add(1)
			retries.after(buyer, attempts[buyer])
		case transport:
			r.codes["TRANSPORT_ERROR"]++
		default:
			r.answered++
			r.codes[answer.Code]++
			r.lastAnswer = res.Timestamp.Add(res.Latency).Sub(start)
		}
		if answer.Code == gateway.CodeQueued {
			s.queued++
			queued.Add(1)
			r.queuedAt = append(r.queuedAt, res.Timestamp.Add(res.Latency))
		}
		pending.Done()
	}
	r.loadTook = <-loadTook
	if err := <-faulted; err != nil {
		return nil, err
	}
	cpu1, err := loadCPU(ctx, procs.Pid("gateway"), rdb)
	if err != nil {
		return nil, err
	}
	r.gatewayCPU, r.redisCPU = cpu1.gateway-cpu0.gateway, cpu1.redis-cpu0.redis
	if err := <-profiled; err != nil {
		return nil, err
	}
	if c.ordersAfterLoad { // the orders now, from the broker's backlog
		if err := startAll(consumers); err != nil {
			return nil, err
		}
	}

	// Every queued reservation becomes an order (the SKU's stock is the
	// same in Redis and PostgreSQL), or the settle timeout.
	deadline := time.Now().Add(c.timeout)
	for {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, activity).Scan(&r.orders); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			break
		}
		if r.orders >= queued.Load() && openReserved(ctx, rs, activity, c.buckets) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1100 * time.Millisecond) // the backlog's last sample
	stopSampling()
	sampling.Wait()
	for i, b := range backlog {
		if i >= 0 {
			r.at(i).backlog, r.at(i).sampled = b, true
		}
	}

	rows, err := pool.Query(ctx, `SELECT extract(epoch FROM r.reserved_at)::float8, extract(epoch FROM o.created_at - r.reserved_at)::float8, extract(epoch FROM o.created_at)::float8
		FROM orders o JOIN inventory_reservation r USING (reservation_id) WHERE o.activity_id = $1`, activity)
	if err != nil {
		return nil, err
	}
	var last float64
	for rows.Next() {
		var reservedAt, took, created float64
		if err := rows.Scan(&reservedAt, &took, &created); err != nil {
			rows.Close()
			return nil, err
		}
		us := max(1, min(histMax, int64(took*1e6)))
		_ = r.toOrder.RecordValue(us)
		if at := time.Unix(0, int64(reservedAt*1e9)); !r.faultFrom.IsZero() && !at.Before(r.faultFrom) && !at.After(r.faultTo) {
			r.faultToOrderMax = max(r.faultToOrderMax, took*1000)
		}
		startS := float64(start.UnixNano()) / 1e9
		if i := int(reservedAt - startS); i >= 0 {
			_ = r.at(i).toOrder.RecordValue(us)
		}
		if i := int(created - startS); i >= 0 {
			r.at(i).orders++
		}
		last = max(last, created)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	r.settled = time.Duration((last - float64(start.UnixNano())/1e9) * float64(time.Second))
	r.checks, err = saleChecks(ctx, pool, rs, activity, c, queued.Load(), int64(r.codes[gateway.CodeQueued]+r.codes[gateway.CodeSoldOut]))
	if err != nil {
		return nil, err
	}
	// The load itself: each buyer's request sent once (a second would be a
	// replay, counted as a second QUEUED).
	r.checks = append(r.checks, check{"each buyer's request sent once", r.offered == c.requests, fmt.Sprintf("%d sent of %d", r.offered, c.requests)})
	for _, ch := range r.checks {
		if !ch.ok {
			r.failed = append(r.failed, ch.name+": "+ch.got)
		}
	}
	return r, nil
}

// saleChecks are the sale's promises: every invariant (package invariants,
// the sale settled) and what this load owes its buyers.
func saleChecks(ctx context.Context, pool *pgxpool.Pool, rs *redisstore.Store, activity int64, c config, queued, answered int64) ([]check, error) {
	rep, err := invariants.Await(ctx, invariants.Sources{Pool: pool, Redis: rs}, activity,
		[]invariants.SKU{{ID: sku, Buckets: c.buckets}}, invariants.Expect{Settled: true}, 30*time.Second)
	if err != nil {
		return nil, err
	}
	var orders, reservations int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE activity_id = $1),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1)`, activity).Scan(&orders, &reservations); err != nil {
		return nil, fmt.Errorf("reading the orders: %w", err)
	}
	// Buyers with a final answer (QUEUED, SOLD_OUT) are owed an order while
	// stock lasts: a SOLD_OUT with units left is stranded stock. A buyer
	// told 503 would retry with the same request id; the load generator
	// does not, so those are left out.
	want := min(answered, c.stock)
	rep.Add("every unit sold or every answered buyer served", orders == want, "%d orders, want %d (%d buyers answered QUEUED or SOLD_OUT)", orders, want, answered)
	rep.Add("every QUEUED reservation recorded in PostgreSQL", reservations == queued, "%d of %d", reservations, queued)
	out := make([]check, 0, len(rep.Checks))
	for _, ch := range rep.Checks {
		out = append(out, check{ch.Name, ch.OK, ch.Got})
	}
	return out, nil
}

// openReserved is the SKU's reservations Redis still holds open (-1 when
// unreadable).
func openReserved(ctx context.Context, rs *redisstore.Store, activity int64, buckets int) int64 {
	var open int64
	for _, sl := range redisstore.Slots(activity, sku, buckets) {
		cs, err := rs.ReadCounters(ctx, sl)
		if err != nil {
			return -1
		}
		open += cs.OpenReserved
	}
	return open
}

// profileGateway saves a CPU profile of the gateway, taken after wait for
// length, to path.
func profileGateway(ctx context.Context, wait, length time.Duration, path string) error {
	time.Sleep(wait)
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(length.Seconds()))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling the gateway: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling the gateway: HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(path) //nolint:gosec // our report directory
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// firstN paces as p does (nil: as fast as the workers take them) and stops
// after n requests.
type firstN struct {
	p vegeta.Pacer
	n uint64
}

func (f firstN) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= f.n {
		return 0, true
	}
	if f.p == nil {
		return 0, false
	}
	return f.p.Pace(elapsed, hits)
}

func (f firstN) Rate(elapsed time.Duration) float64 {
	if f.p == nil {
		return 0
	}
	return f.p.Rate(elapsed)
}

type cpuSample struct{ gateway, redis time.Duration }

// loadCPU reads the CPU time the gateway process and the Redis server have
// used so far (Redis: INFO cpu, its main and background threads).
func loadCPU(ctx context.Context, gatewayPid int, rdb *redis.Client) (cpuSample, error) {
	var s cpuSample
	var err error
	if s.gateway, err = salekit.CPU(gatewayPid); err != nil {
		return s, fmt.Errorf("the gateway's CPU: %w", err)
	}
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return s, fmt.Errorf("redis INFO cpu: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return s, fmt.Errorf("redis INFO cpu %s=%q: %w", k, v, err)
			}
			s.redis += time.Duration(f * float64(time.Second))
		}
	}
	return s, nil
}

// injectFault waits, then runs c.fault for c.faultFor and records its window.
func injectFault(c config, procs *salekit.Processes, wait time.Duration, r *saleResult) error {
	time.Sleep(wait)
	r.faultFrom = time.Now()
	defer func() { r.faultTo = time.Now() }()
	switch c.fault {
	case "kill-consumer":
		restart, err := procs.Kill9("consumer")
		if err != nil {
			return err
		}
		time.Sleep(c.faultFor)
		return restart()
	default: // the stack's own faults
		out, err := exec.Command(filepath.Join("hack", "stack.sh"), "fault", c.fault, strconv.Itoa(int(c.faultFor.Seconds()))).CombinedOutput() //nolint:gosec // our script
		if err != nil {
			return fmt.Errorf("hack/stack.sh fault %s: %w\n%s", c.fault, err, out)
		}
		return nil
	}
}

// recovered is how long after the fault ended the first QUEUED answer came
// (-1: none came).
func (r *saleResult) recovered() time.Duration {
	for _, at := range r.queuedAt {
		if at.After(r.faultTo) {
			return at.Sub(r.faultTo)
		}
	}
	return -1
}

// retrier sends a buyer's request again after a backoff (0.5 s doubling to
// 5 s, ±20 %), as a client told 503 would: the same request id and token.
type retrier struct {
	targets []vegeta.Target
	results chan<- *vegeta.Result
	client  *http.Client
}

func newRetrier(targets []vegeta.Target, results chan<- *vegeta.Result) *retrier {
	return &retrier{targets: targets, results: results, client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 1024}}}
}

func (rt *retrier) after(buyer, attempt int) {
	wait := min(5*time.Second, 500*time.Millisecond<<min(attempt-1, 4))
	wait = time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64())) //nolint:gosec // jitter
	go func() {
		time.Sleep(wait)
		t := rt.targets[buyer]
		res := &vegeta.Result{Attack: "retry", Method: t.Method, URL: t.URL, Timestamp: time.Now()}
		req, err := t.Request()
		if err == nil {
			var resp *http.Response
			if resp, err = rt.client.Do(req); err == nil {
				res.Code = uint16(resp.StatusCode) //nolint:gosec // an HTTP status
				res.Body, err = io.ReadAll(io.LimitReader(resp.Body, 4096))
				_ = resp.Body.Close()
			}
		}
		if err != nil {
			res.Error = err.Error()
		}
		res.Latency = time.Since(res.Timestamp)
		rt.results <- res
	}()
}
