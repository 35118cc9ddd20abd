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
	// cpuLoad and cpuSettle are each process group's CPU during the load
	// and from its end until the sale settled (every order made, nothing
	// open in Redis): the workloads, the servers, the load generator.
	cpuLoad, cpuSettle salekit.CPUReading
	// cpuAt is the reading at the load's end, where cpuSettle starts.
	cpuAt    salekit.CPUReading
	redisCPU time.Duration // Redis's CPU time during the load
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
	b := &benchSale{c: c, bin: bin, activity: time.Now().UnixMilli() % 1_000_000_000_000}
	defer b.close()
	if err := b.open(ctx, logPath); err != nil {
		return nil, err
	}
	if err := b.startAll(b.workloads()); err != nil {
		return nil, err
	}
	if err := salekit.WaitHTTP("http://" + gatewayAddr + "/readyz"); err != nil {
		return nil, err
	}
	r, err := b.load(ctx, profPath)
	if err != nil {
		return nil, err
	}
	if c.ordersAfterLoad { // the orders now, from the broker's backlog
		if err := b.startAll(b.consumers()); err != nil {
			return nil, err
		}
	}
	if err := b.awaitOrders(ctx, r); err != nil {
		return nil, err
	}
	if err := b.readOrderLatencies(ctx, r); err != nil {
		return nil, err
	}
	if r.checks, err = saleChecks(ctx, b.pool, b.rs, b.activity, c, b.queued.Load(), int64(r.codes[gateway.CodeQueued]+r.codes[gateway.CodeSoldOut])); err != nil {
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

// benchSale is one run's sale: what each step sets up for the next.
type benchSale struct {
	c        config
	bin      string
	activity int64
	tokenKey string
	common   []string
	pool     *pgxpool.Pool
	rdb      *redis.Client
	rs       *redisstore.Store
	roles    *salekit.Roles
	logf     *os.File
	procs    salekit.Processes
	closers  []func()
	// queued counts the QUEUED answers so far (the backlog sampler reads it).
	queued atomic.Int64
	// backlog is QUEUED minus orders at each second of the load (sampler).
	backlog map[int]int64
	// stopSampling stops the backlog's sampler and waits for it.
	stopSampling func()
}

func (b *benchSale) close() {
	if b.stopSampling != nil {
		b.stopSampling()
	}
	b.procs.Stop()
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// open provisions and opens the sale, vacuums the tables so that runs
// compare, makes the workloads' roles, and opens the log.
func (b *benchSale) open(ctx context.Context, logPath string) error {
	b.tokenKey = salekit.RandomHex(32)
	b.common = salekit.SaleEnv(b.activity, fmt.Sprintf("%d:%d", sku, b.c.buckets), b.tokenKey, gatewayAddr)
	for _, args := range [][]string{{"activity", "provision", "-stock", fmt.Sprintf("%d=%d", sku, b.c.stock), "-price", fmt.Sprintf("%d=9900", sku)},
		{"activity", "window", "-state", "ACTIVE", "-payment-window", "1h"}} {
		if out, err := salekit.Cmd(b.bin, b.common, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("seckill %s %s: %w\n%s", args[0], args[1], err, out)
		}
	}
	var err error
	if b.pool, err = pgxpool.New(ctx, salekit.Env("SECKILL_PG_DSN")); err != nil {
		return err
	}
	b.closers = append(b.closers, b.pool.Close)
	// Every run starts where routine maintenance leaves the database: the
	// dead rows of earlier sales (and tests) vacuumed, so that runs compare.
	if _, err := b.pool.Exec(ctx, `VACUUM (ANALYZE) event_outbox, consumer_inbox, inventory_reservation, orders, inventory_ledger, sku_inventory`); err != nil {
		return fmt.Errorf("vacuuming before the sale: %w", err)
	}
	if b.roles, err = salekit.NewRoles(b.bin, b.common, filepath.Dir(b.bin)); err != nil {
		return err
	}
	b.closers = append(b.closers, b.roles.Close)
	b.rdb = redis.NewClient(salekit.RedisOptions())
	b.closers = append(b.closers, func() { _ = b.rdb.Close() })
	b.rs = redisstore.New(b.rdb)
	if b.logf, err = os.Create(logPath); err != nil { //nolint:gosec // our report directory
		return err
	}
	b.closers = append(b.closers, func() { _ = b.logf.Close() })
	return nil
}

// workloads are the processes started before the load: the consumers too
// unless they come after it (-orders-after-load).
func (b *benchSale) workloads() []string {
	ws := []string{"gateway", "relay", "projector", "compensator", "scanner"}
	if !b.c.ordersAfterLoad {
		ws = append(ws, b.consumers()...)
	}
	return ws
}

func (b *benchSale) consumers() []string {
	cs := make([]string, b.c.consumers)
	for i := range cs {
		cs[i] = "consumer"
	}
	return cs
}

// startAll starts ws, each on the sale's own topics and groups
// (hack/rocketmq/resources.txt: the cancel timers of its orders fall due
// after the run, and on the production topics they would reach the next
// sale's canceller).
func (b *benchSale) startAll(ws []string) error {
	topics := map[string][]string{
		"gateway":   append([]string{"-create-topic", benchCreate}, strings.Fields(b.c.gatewayArgs)...),
		"scanner":   {"-create-topic", benchCreate},
		"consumer":  {"-create-topic", benchCreate, "-events-topic", benchEvents, "-cancel-topic", benchCancel, "-group", "seckill-bench-sale-consumer"},
		"relay":     {"-events-topic", benchEvents, "-cancel-topic", benchCancel},
		"projector": {"-events-topic", benchEvents, "-group", "seckill-bench-sale-projector"},
	}
	for _, w := range ws {
		args := append([]string{w}, topics[w]...)
		env := b.roles.Env(w, b.common)
		if w != "gateway" {
			args = append(args, "-metrics-addr", "0")
		} else {
			env = append(env, strings.Fields(b.c.gatewayEnv)...)
			if b.c.profile {
				env = append(env, "SECKILL_PPROF_ADDR="+pprofAddr)
			}
		}
		if err := b.procs.Start(b.bin, env, b.logf, args...); err != nil {
			return err
		}
	}
	return nil
}

// targets are the requests, made before the clock: a new user each,
// signed tokens. A buyer is told apart in the results by its URL
// (?buyer=i, which the gateway ignores), so that a 503 is retried with the
// buyer's own request.
func (b *benchSale) targets() []vegeta.Target {
	url := fmt.Sprintf("http://%s/v1/activities/%d/skus/%d/reservations?buyer=", gatewayAddr, b.activity, sku)
	targets := make([]vegeta.Target, b.c.requests)
	exp := time.Now().Add(time.Hour)
	for i := range targets {
		user := int64(70_000_000 + i)
		targets[i] = vegeta.Target{Method: http.MethodPost, URL: url + strconv.Itoa(i),
			Body: []byte(`{"request_id":"` + ids.NewRandom().String() + `"}`),
			Header: http.Header{"Authorization": {"Bearer " + gateway.SignToken(user, []byte(b.tokenKey), exp)},
				"Content-Type": {"application/json"}}}
	}
	return targets
}

// attacker paces the load: an open loop at -rate; at -rate 0 a closed loop
// of -concurrency clients, each sending its next request when the last is
// answered (the gateway's saturation throughput). Each target is sent
// once: the pacer stops at -requests (vegeta's static targeter would start
// over at the first, a replay counted as a second QUEUED). dur is the
// load's planned length (0 for the closed loop).
func (b *benchSale) attacker() (a *vegeta.Attacker, pacer firstN, dur time.Duration) {
	c := b.c
	pacer = firstN{p: vegeta.Rate{Freq: c.rate, Per: time.Second}, n: uint64(c.requests)}
	workers, maxWorkers := uint64(64), uint64(4096)
	dur = time.Duration(float64(c.requests) / float64(max(1, c.rate)) * float64(time.Second))
	if c.rate == 0 {
		pacer.p, dur = nil, 0
		workers, maxWorkers = uint64(c.concurrency), uint64(c.concurrency)
	}
	return vegeta.NewAttacker(vegeta.Timeout(30*time.Second), vegeta.KeepAlive(true),
		vegeta.Workers(workers), vegeta.MaxWorkers(maxWorkers), vegeta.Connections(1024), vegeta.MaxBody(4096)), pacer, dur
}

// sampleBacklog records, each second until ctx ends, QUEUED minus orders.
func (b *benchSale) sampleBacklog(ctx context.Context, start time.Time) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			var orders int64
			qctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
			err := b.pool.QueryRow(qctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, b.activity).Scan(&orders)
			cancel()
			if err == nil { // a sample missed is a gap in the plot, not a figure
				b.backlog[int(now.Sub(start)/time.Second)-1] = b.queued.Load() - orders
			}
		}
	}
}

// load runs the buyers with the backlog sampler, the gateway's profile and
// the fault beside them, and counts every answer, per second.
func (b *benchSale) load(ctx context.Context, profPath string) (*saleResult, error) {
	c := b.c
	targets := b.targets()
	attacker, pacer, dur := b.attacker()
	r := &saleResult{codes: map[string]int{}, reserve: newHist(), toOrder: newHist()}
	start := time.Now()
	r.start = start
	// The sampler runs until the orders are in (awaitOrders stops it).
	sampleCtx, stopSampling := context.WithCancel(ctx)
	b.backlog = map[int]int64{}
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() { defer sampling.Done(); b.sampleBacklog(sampleCtx, start) }()
	b.stopSampling = func() {
		stopSampling()
		sampling.Wait()
	}
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
		go func() { faulted <- injectFault(c, &b.procs, dur/3, r) }()
	} else {
		faulted <- nil
	}
	redis0, err := redisCPU(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	all0, err := b.readCPU()
	if err != nil {
		return nil, err
	}
	if err := b.collect(r, attacker, pacer, targets, start); err != nil {
		return nil, err
	}
	if err := <-faulted; err != nil {
		return nil, err
	}
	redis1, err := redisCPU(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	all1, err := b.readCPU()
	if err != nil {
		return nil, err
	}
	r.cpuLoad, r.cpuAt = all1.Sub(all0), all1
	r.gatewayCPU, r.redisCPU = r.cpuLoad["gateway"], redis1-redis0
	if err := <-profiled; err != nil {
		return nil, err
	}
	return r, nil
}

// collect sends the attack and counts the results of the buyers' first
// requests and of their retries, in one stream. pending holds one unit per
// result not yet counted and per retry not yet answered: a retry is added
// before the result that caused it is done, so the stream ends only when
// every buyer has a final answer.
func (b *benchSale) collect(r *saleResult, attacker *vegeta.Attacker, pacer firstN, targets []vegeta.Target, start time.Time) error {
	c := b.c
	var answer struct {
		Code string `json:"code"`
	}
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
	var bad error
	for res := range results {
		buyer, err := strconv.Atoi(res.URL[strings.LastIndexByte(res.URL, '=')+1:])
		if err != nil || buyer < 0 || buyer >= c.requests {
			if bad == nil {
				bad = fmt.Errorf("a result for no buyer: %q", res.URL)
			}
			pending.Done()
			continue
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
		_ = r.reserve.RecordValue(us) // within the histogram's range: never an error
		_ = s.reserve.RecordValue(us)
		answer.Code = ""
		transport := res.Error != "" && res.Code == 0
		if !transport {
			if json.Unmarshal(res.Body, &answer) != nil || answer.Code == "" {
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
			b.queued.Add(1)
			r.queuedAt = append(r.queuedAt, res.Timestamp.Add(res.Latency))
		}
		pending.Done()
	}
	r.loadTook = <-loadTook
	return bad
}

// awaitOrders waits until every queued reservation is an order (the SKU's
// stock is the same in Redis and PostgreSQL) and none is open in Redis, or
// the settle timeout; then it takes the backlog's last sample.
func (b *benchSale) awaitOrders(ctx context.Context, r *saleResult) error {
	deadline := time.Now().Add(b.c.timeout)
	for {
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, b.activity).Scan(&r.orders); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			break
		}
		if r.orders >= b.queued.Load() && openReserved(ctx, b.rs, b.activity, b.c.buckets) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	settled, err := b.readCPU()
	if err != nil {
		return err
	}
	r.cpuSettle = settled.Sub(r.cpuAt)
	time.Sleep(1100 * time.Millisecond) // the backlog's last sample
	b.stopSampling()
	for i, v := range b.backlog {
		if i >= 0 {
			r.at(i).backlog, r.at(i).sampled = v, true
		}
	}
	return nil
}

// readOrderLatencies reads every order's reservation → order time into the
// histograms (the whole run's, its second's, the fault's worst) and when
// the last order was made.
func (b *benchSale) readOrderLatencies(ctx context.Context, r *saleResult) error {
	rows, err := b.pool.Query(ctx, `SELECT extract(epoch FROM r.reserved_at)::float8, extract(epoch FROM o.created_at - r.reserved_at)::float8, extract(epoch FROM o.created_at)::float8
		FROM orders o JOIN inventory_reservation r USING (reservation_id) WHERE o.activity_id = $1`, b.activity)
	if err != nil {
		return err
	}
	defer rows.Close()
	startS := float64(r.start.UnixNano()) / 1e9
	var last float64
	for rows.Next() {
		var reservedAt, took, created float64
		if err := rows.Scan(&reservedAt, &took, &created); err != nil {
			return err
		}
		us := max(1, min(histMax, int64(took*1e6)))
		_ = r.toOrder.RecordValue(us) // within the histogram's range: never an error
		if at := time.Unix(0, int64(reservedAt*1e9)); !r.faultFrom.IsZero() && !at.Before(r.faultFrom) && !at.After(r.faultTo) {
			r.faultToOrderMax = max(r.faultToOrderMax, took*1000)
		}
		if i := int(reservedAt - startS); i >= 0 {
			_ = r.at(i).toOrder.RecordValue(us)
		}
		if i := int(created - startS); i >= 0 {
			r.at(i).orders++
		}
		last = max(last, created)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	r.settled = time.Duration((last - startS) * float64(time.Second))
	return nil
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

// groupLoad is the load generator's group in a CPU reading.
const groupLoad = "bench-sale (the buyers)"

// readCPU reads every process group's CPU: the workloads, the servers and
// this process, which plays the buyers.
func (b *benchSale) readCPU() (salekit.CPUReading, error) {
	r, err := b.procs.ReadCPU()
	if err != nil {
		return nil, fmt.Errorf("reading the processes' CPU: %w", err)
	}
	if r[groupLoad], err = salekit.CPU(os.Getpid()); err != nil {
		return nil, fmt.Errorf("reading the processes' CPU: %w", err)
	}
	return r, nil
}

// redisCPU reads the CPU time the sale's Redis server has used so far
// (INFO cpu, its main and background threads; the /proc reading sums every
// redis-server of the stack).
func redisCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	var used time.Duration
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO cpu: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("redis INFO cpu %s=%q: %w", k, v, err)
			}
			used += time.Duration(f * float64(time.Second))
		}
	}
	return used, nil
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
