// Command demo runs a real flash sale on the local stack (hack/stack.sh up):
// the seckill workloads as processes (gateway, two order consumers, outbox
// relay, projector, compensator, send-scanner), stock provisioned in
// PostgreSQL and Redis, many concurrent buyers with client retries over HTTP,
// then a summary with latencies and every invariant checked.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/hack/salekit"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

const (
	addr         = "127.0.0.1:28090"
	channelAddr  = "127.0.0.1:28091" // the simulated payment channel
	paymentsAddr = "127.0.0.1:28092" // the payments workload (callbacks)
)

func main() {
	buyers := flag.Int("buyers", 2000, "concurrent buyers")
	stock := flag.Int64("stock", 100, "PostgreSQL stock per SKU")
	buckets := flag.Int("buckets", 4, "Redis stock buckets per SKU")
	flag.Float64Var(&buyerRate, "rate", 0, "buyers arriving per second (0: all at once)")
	flag.DurationVar(&paymentWindow, "payment-window", 4*time.Second, "how long an order waits for payment")
	flag.Parse()
	if *buyers <= 0 || *stock <= 0 || *buckets <= 0 || *buckets > 64 || buyerRate < 0 {
		fmt.Fprintln(os.Stderr, "demo: -buyers and -stock must be positive, 1 <= -buckets <= 64, -rate >= 0")
		os.Exit(2)
	}
	if err := run(*buyers, *stock, *buckets); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

var paymentWindow time.Duration

// buyerRate paces the buyers (0: all at once).
var buyerRate float64

// demo is one run's sale: what each step sets up for the next.
type demo struct {
	ctx      context.Context
	dir, bin string
	activity int64
	nBuckets int
	skus     []int64
	skuSet   []invariants.SKU
	tokenKey string
	common   []string
	pool     *pgxpool.Pool
	rs       *redisstore.Store
	roles    *salekit.Roles
	logf     *os.File
	procs    salekit.Processes
	payKey   string
	channel  *provider.Client
	closers  []func()
	// start is when the first buyer came; accepted the QUEUED reservations
	// (first answer's time).
	start    time.Time
	accepted map[string]time.Time
	results  []answer
	sold     int
}

// answer is one HTTP answer a buyer got.
type answer struct {
	code    string
	latency time.Duration
}

// run is the demo, step by step: the sale opened, the workloads started,
// the buyers, the reservations' outcome, the payments, the orders'
// outcome, and the judgement (the invariants and the final reconcile job).
func run(buyers int, pgStock int64, nBuckets int) error {
	d := &demo{ctx: context.Background(), activity: time.Now().Unix(), nBuckets: nBuckets, skus: []int64{90001, 90002},
		skuSet: []invariants.SKU{{ID: 90001, Buckets: nBuckets}, {ID: 90002, Buckets: nBuckets}}, accepted: map[string]time.Time{}}
	defer d.close()
	if err := d.open(pgStock); err != nil {
		return err
	}
	if err := d.startWorkloads(); err != nil {
		return err
	}
	d.buy(buyers)
	if err := d.reportReservations(); err != nil {
		return err
	}
	refused, payErrors, err := d.pay()
	if err != nil {
		return err
	}
	unsettled, err := d.awaitOrders()
	if err != nil {
		return err
	}
	return d.judge(refused, payErrors, unsettled)
}

func (d *demo) close() {
	d.procs.Stop()
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// open builds the workloads binary, provisions and opens the sale with the
// store operations the operator makes (seckill activity provision /
// window), makes the workloads' roles, and drifts SKU 90002's Redis stock
// above PostgreSQL's.
func (d *demo) open(pgStock int64) error {
	dir, err := os.MkdirTemp("", "seckill-demo")
	if err != nil {
		return err
	}
	d.dir = dir
	d.closers = append(d.closers, func() { _ = os.RemoveAll(dir) })
	fmt.Println("building the workloads binary …")
	if d.bin, err = salekit.Build(dir); err != nil {
		return err
	}
	redisStock := map[int64]int64{90001: pgStock, 90002: pgStock + pgStock/10} // 90002: Redis drifted above PostgreSQL
	d.tokenKey = salekit.RandomHex(32)
	d.common = salekit.SaleEnv(d.activity, fmt.Sprintf("90001:%d,90002:%d", d.nBuckets, d.nBuckets), d.tokenKey, addr)
	stockFlag := fmt.Sprintf("90001=%d,90002=%d", pgStock, pgStock)
	for _, args := range [][]string{{"activity", "provision", "-stock", stockFlag, "-price", "90001=19900,90002=4900", "-currency", "CNY"},
		{"activity", "window", "-state", "ACTIVE", "-payment-window", paymentWindow.String()}} {
		out, err := salekit.Cmd(d.bin, d.common, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("seckill %s %s: %w\n%s", args[0], args[1], err, out)
		}
		fmt.Print(string(out))
	}
	if d.pool, err = pgxpool.New(d.ctx, salekit.Env("SECKILL_PG_DSN")); err != nil {
		return err
	}
	d.closers = append(d.closers, d.pool.Close)
	// Each workload connects as its own role, as on a cluster.
	if d.roles, err = salekit.NewRoles(d.bin, d.common, dir); err != nil {
		return err
	}
	d.closers = append(d.closers, d.roles.Close)
	rdb := redis.NewClient(salekit.RedisOptions())
	d.closers = append(d.closers, func() { _ = rdb.Close() })
	if err := redisstore.LoadScripts(d.ctx, rdb); err != nil {
		return err
	}
	d.rs = redisstore.New(rdb)
	// Drift, to show compensation: SKU 90002's Redis buckets are given more
	// stock than PostgreSQL has (a later generation, Redis only), so some
	// reservations are rejected by PostgreSQL and compensated.
	for b, target := range control.BucketTargets(redisStock[90002], d.nBuckets) {
		if _, _, err := d.rs.Provision(d.ctx, redisstore.Slots(d.activity, 90002, d.nBuckets)[b], target, 2); err != nil {
			return err
		}
	}
	fmt.Printf("activity %d: SKU 90001 stock %d; SKU 90002 stock %d in PostgreSQL but %d in Redis (drift, to show compensation); %d buckets each\n",
		d.activity, pgStock, pgStock, redisStock[90002], d.nBuckets)
	return nil
}

// startWorkloads starts the simulated payment channel and every workload
// as a process, each with its own role, and waits for the gateway.
func (d *demo) startWorkloads() error {
	logf, err := os.Create(filepath.Join(".stack", "demo-workloads.log"))
	if err != nil {
		return err
	}
	d.logf = logf
	d.closers = append(d.closers, func() { _ = logf.Close() })
	// The simulated payment channel (seckill provider-sim): its successes
	// are posted, signed, to the payments workload, each twice (callbacks
	// duplicate).
	d.payKey = salekit.RandomHex(32)
	d.channel = &provider.Client{ProviderName: "sim", BaseURL: "http://" + channelAddr}
	if err := d.procs.Start(d.bin, d.common, logf, "provider-sim", "-addr", channelAddr, "-callback-url", "http://"+paymentsAddr,
		"-payment-keys", "sim:"+d.payKey, "-duplicates", "1"); err != nil {
		return err
	}
	for i, w := range []string{"gateway", "consumer", "consumer", "relay", "projector", "compensator", "scanner", "canceller", "payments"} {
		args := []string{w}
		switch w {
		case "canceller":
			args = append(args, "-provider-url", "http://"+channelAddr)
		case "payments":
			args = append(args, "-addr", paymentsAddr, "-payment-keys", "sim:"+d.payKey, "-relookup", "2s")
		}
		if w != "gateway" && w != "payments" { // these serve /metrics on their API port
			args = append(args, "-metrics-addr", fmt.Sprintf("127.0.0.1:%d", demoMetricsPort+i))
		}
		if err := d.procs.Start(d.bin, d.roles.Env(w, d.common), logf, args...); err != nil {
			return err
		}
	}
	fmt.Printf("workloads running: gateway, 2 × consumer, relay, projector, compensator, scanner, canceller, payments (log: %s)\n", logf.Name())
	return salekit.WaitHTTP("http://" + addr + "/readyz")
}

// buy sends the buyers: skewed on purpose — three in five hash to bucket
// 0, which empties first and borrows stock from its siblings (SOLD_OUT only
// when the SKU is sold out); a quarter of them retry the same request.
func (d *demo) buy(buyers int) {
	var mu sync.Mutex
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	d.start = time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	users := make([]int64, 0, buyers)
	for id := int64(80000000); len(users) < buyers; id++ {
		if len(users)%5 >= 3 || d.nBuckets == 1 || redisstore.BucketFor(id, d.nBuckets) == 0 {
			users = append(users, id)
		}
	}
	for i, user := range users {
		if buyerRate > 0 {
			time.Sleep(time.Until(d.start.Add(time.Duration(float64(i) / buyerRate * float64(time.Second)))))
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(user int64) {
			defer wg.Done()
			defer func() { <-sem }()
			sku := d.skus[user%2]
			token := gateway.SignToken(user, []byte(d.tokenKey), time.Now().Add(time.Hour))
			body := `{"request_id":"` + ids.NewRandom().String() + `"}`
			tries := 1 + int(user%4/3) // a quarter of the clients retry the same request
			for i := 0; i < tries; i++ {
				a, t0, dur := d.reserve(client, sku, token, body)
				mu.Lock()
				d.results = append(d.results, answer{a.Code, dur})
				if a.Code == gateway.CodeQueued {
					if _, seen := d.accepted[a.RID]; !seen {
						d.accepted[a.RID] = t0
					}
				}
				mu.Unlock()
			}
		}(user)
	}
	wg.Wait()
	elapsed := time.Since(d.start)
	fmt.Printf("\n%d HTTP requests from %d buyers in %s (%.0f req/s)\n", len(d.results), buyers, elapsed.Round(time.Millisecond), float64(len(d.results))/elapsed.Seconds())
}

// reserveAnswer is the part of the gateway's answer the demo reads.
type reserveAnswer struct {
	Code string `json:"code"`
	RID  string `json:"reservation_id"`
}

// reserve is one POST of a reservation (a transport failure answers
// TRANSPORT_ERROR).
func (d *demo) reserve(client *http.Client, sku int64, token, body string) (reserveAnswer, time.Time, time.Duration) {
	var a reserveAnswer
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/v1/activities/%d/skus/%d/reservations", addr, d.activity, sku), bytes.NewBufferString(body))
	if err != nil {
		a.Code = "REQUEST_ERROR"
		return a, time.Now(), 0
	}
	req.Header.Set("Authorization", "Bearer "+token)
	t0 := time.Now()
	resp, err := client.Do(req)
	dur := time.Since(t0)
	if err != nil {
		a.Code = "TRANSPORT_ERROR"
		return a, t0, dur
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		a.Code = "UNREADABLE_ANSWER"
	}
	return a, t0, dur
}

// reportReservations waits until every QUEUED reservation is terminal (its
// compensation, if any, done) and prints the answers, the orders and the
// latencies.
func (d *demo) reportReservations() error {
	src := invariants.Sources{Pool: d.pool, Redis: d.rs}
	if _, err := invariants.Await(d.ctx, src, d.activity, d.skuSet, invariants.Expect{Settled: true}, 2*time.Minute); err != nil {
		return err
	}
	converged := time.Since(d.start)
	codes := map[string]int{}
	lat := make([]time.Duration, 0, len(d.results))
	for _, r := range d.results {
		codes[r.code]++
		lat = append(lat, r.latency)
	}
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-22s %d\n", k, codes[k])
	}
	var rejected, compensated, manual int
	if err := d.pool.QueryRow(d.ctx, `SELECT
		(SELECT count(*) FROM orders WHERE activity_id = $1),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status IN ('ORDER_REJECTED', 'COMPENSATING', 'COMPENSATED')),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status = 'COMPENSATED'),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status = 'MANUAL_REVIEW')`, d.activity).Scan(&d.sold, &rejected, &compensated, &manual); err != nil {
		return fmt.Errorf("reading the outcome: %w", err)
	}
	var p50, p99 float64
	if err := d.pool.QueryRow(d.ctx, `SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0)
		FROM (SELECT extract(epoch FROM o.created_at - r.reserved_at) * 1000 AS ms FROM orders o JOIN inventory_reservation r USING (reservation_id) WHERE o.activity_id = $1) x`, d.activity).Scan(&p50, &p99); err != nil {
		return fmt.Errorf("reading reservation → order latency: %w", err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("\norders created          %d\nrejected by PostgreSQL  %d (compensated in Redis: %d, manual review: %d)\n", d.sold, rejected, compensated, manual)
	fmt.Printf("reserve latency (HTTP)  p50 %s  p99 %s\n", lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	fmt.Printf("reservation → order     p50 %.1f ms  p99 %.1f ms\n", p50, p99)
	fmt.Printf("all settled after       %s\n", converged.Round(time.Millisecond))
	return nil
}

// demoOrder is an order to pay: what the merchant asks the channel to charge.
type demoOrder struct {
	id       uuid.UUID
	user     int64
	amount   int64
	currency string
}

// pay has three buyers in five pay, at some point within 1.5 payment
// windows — the late ones find the payment closed by the timeout cancel
// (refused).
func (d *demo) pay() (refused, payErrors int, err error) {
	orders, err := d.orders()
	if err != nil {
		return 0, 0, fmt.Errorf("reading the orders to pay: %w", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, o := range orders {
		if o.user%5 >= 3 {
			continue // never pays: the timer cancels the order
		}
		wg.Add(1)
		go func(o demoOrder) {
			defer wg.Done()
			time.Sleep(time.Duration(o.user%7) * paymentWindow * 3 / 14) // 0 … 1.3 windows
			_, err := d.channel.Pay(d.ctx, o.id, o.amount, o.currency)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, provider.ErrClosed):
				refused++
			case err != nil:
				payErrors++
			}
		}(o)
	}
	wg.Wait()
	return refused, payErrors, nil
}

func (d *demo) orders() ([]demoOrder, error) {
	rows, err := d.pool.Query(d.ctx, `SELECT order_id, user_id, amount_cents, currency FROM orders WHERE activity_id = $1`, d.activity)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var orders []demoOrder
	for rows.Next() {
		var o demoOrder
		if err := rows.Scan(&o.id, &o.user, &o.amount, &o.currency); err != nil {
			return nil, err
		}
		orders = append(orders, o)
	}
	return orders, rows.Err()
}

// awaitOrders waits (a payment window and 90 s at most) until every order
// is PAID or CANCELLED; it answers how many are still open.
func (d *demo) awaitOrders() (int, error) {
	deadline := time.Now().Add(paymentWindow + 90*time.Second)
	for {
		var unsettled int
		if err := d.pool.QueryRow(d.ctx, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')`, d.activity).Scan(&unsettled); err != nil {
			return 0, fmt.Errorf("reading the open orders: %w", err)
		}
		if unsettled == 0 || !time.Now().Before(deadline) {
			return unsettled, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// judge prints how the orders ended, runs the invariant checker (package
// invariants) with what this sale promised besides, and the final reconcile
// job as the operator runs it; any failure is an error.
func (d *demo) judge(refused, payErrors, unsettled int) error {
	report, err := invariants.Await(d.ctx, invariants.Sources{Pool: d.pool, Redis: d.rs}, d.activity, d.skuSet, invariants.Expect{Settled: true}, 30*time.Second)
	if err != nil {
		return err
	}
	var paid, cancelled, refunding int
	if err := d.pool.QueryRow(d.ctx, `SELECT
		(SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'PAID'),
		(SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'CANCELLED'),
		(SELECT count(*) FROM payment_record p JOIN orders o USING (order_id) WHERE o.activity_id = $1 AND p.status = 'REFUNDING')`,
		d.activity).Scan(&paid, &cancelled, &refunding); err != nil {
		return fmt.Errorf("reading how the orders ended: %w", err)
	}
	fmt.Printf("\nhow the orders ended\n  PAID                   %d\n  CANCELLED              %d (%d of them tried to pay after the timeout and were refused by the channel)\n  paid after cancel      %d (refund flow)\n  still open             %d\n",
		paid, cancelled, refused, refunding, unsettled)
	if payErrors > 0 {
		fmt.Printf("  payment calls that failed otherwise: %d\n", payErrors)
	}
	var accounted int64
	if err := d.pool.QueryRow(d.ctx, `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1`, d.activity).Scan(&accounted); err != nil {
		return fmt.Errorf("reading the reservations: %w", err)
	}
	report.Add("every QUEUED reservation recorded in PostgreSQL", accounted == int64(len(d.accepted)), "%d of %d", accounted, len(d.accepted))
	report.Add("every order ended PAID or CANCELLED", unsettled == 0 && paid+cancelled == d.sold, "%d + %d = %d", paid, cancelled, d.sold)
	fmt.Println("\ninvariants (PostgreSQL and Redis)")
	fmt.Print(report.String())
	failed := !report.OK()
	// The safety net on the sale that just ran, as the operator's final Job runs it.
	fmt.Println("\nreconcile job (seckill reconcile -final, the operator's final Job)")
	rec := salekit.Cmd(d.bin, d.roles.Env("reconcile", d.common), "reconcile", "-final", "-watermark-lag", "0s")
	rec.Stdout, rec.Stderr = os.Stdout, os.Stdout
	if err := rec.Run(); err != nil {
		fmt.Printf("  reconcile: %v\n", err)
		failed = true
	}
	if failed {
		return fmt.Errorf("an invariant failed (workload log: %s)", d.logf.Name())
	}
	return nil
}

// demoMetricsPort+i is where the i-th worker serves /metrics.
const demoMetricsPort = 19090
