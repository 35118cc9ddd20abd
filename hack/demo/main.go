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

func run(buyers int, pgStock int64, nBuckets int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "seckill-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Println("building the workloads binary …")
	bin, err := salekit.Build(dir)
	if err != nil {
		return err
	}
	activity := time.Now().Unix()
	skus := []int64{90001, 90002}
	demoSKUs := []invariants.SKU{{ID: 90001, Buckets: nBuckets}, {ID: 90002, Buckets: nBuckets}}
	redisStock := map[int64]int64{90001: pgStock, 90002: pgStock + pgStock/10} // 90002: Redis drifted above PostgreSQL
	tokenKey := salekit.RandomHex(32)
	common := salekit.SaleEnv(activity, fmt.Sprintf("90001:%d,90002:%d", nBuckets, nBuckets), tokenKey, addr)
	// Provision and open the sale with the same store operations the
	// operator makes (seckill activity provision / window).
	stockFlag := fmt.Sprintf("90001=%d,90002=%d", pgStock, pgStock)
	for _, args := range [][]string{{"activity", "provision", "-stock", stockFlag, "-price", "90001=19900,90002=4900", "-currency", "CNY"},
		{"activity", "window", "-state", "ACTIVE", "-payment-window", paymentWindow.String()}} {
		out, err := salekit.Cmd(bin, common, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("seckill %s %s: %w\n%s", args[0], args[1], err, out)
		}
		fmt.Print(string(out))
	}
	pool, err := pgxpool.New(ctx, salekit.Env("SECKILL_PG_DSN"))
	if err != nil {
		return err
	}
	defer pool.Close()
	// Each workload connects as its own role, as on a cluster.
	roles, err := salekit.NewRoles(bin, common, dir)
	if err != nil {
		return err
	}
	defer roles.Close()
	rdb := redis.NewClient(salekit.RedisOptions())
	defer rdb.Close()
	if err := redisstore.LoadScripts(ctx, rdb); err != nil {
		return err
	}
	rs := redisstore.New(rdb)
	// Drift, to show compensation: SKU 90002's Redis buckets are given more
	// stock than PostgreSQL has (a later generation, Redis only), so some
	// reservations are rejected by PostgreSQL and compensated.
	for b, target := range control.BucketTargets(redisStock[90002], nBuckets) {
		if _, _, err := rs.Provision(ctx, redisstore.Slots(activity, 90002, nBuckets)[b], target, 2); err != nil {
			return err
		}
	}
	fmt.Printf("activity %d: SKU 90001 stock %d; SKU 90002 stock %d in PostgreSQL but %d in Redis (drift, to show compensation); %d buckets each\n",
		activity, pgStock, pgStock, redisStock[90002], nBuckets)

	// The workloads, as processes.
	var procs salekit.Processes
	defer procs.Stop()
	logf, err := os.Create(filepath.Join(".stack", "demo-workloads.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	// The simulated payment channel, as a process (seckill provider-sim):
	// its successes are posted, signed, to the payments workload, each twice
	// (callbacks duplicate).
	payKey := salekit.RandomHex(32)
	channel := &provider.Client{ProviderName: "sim", BaseURL: "http://" + channelAddr}
	if err := procs.Start(bin, common, logf, "provider-sim", "-addr", channelAddr, "-callback-url", "http://"+paymentsAddr,
		"-payment-keys", "sim:"+payKey, "-duplicates", "1"); err != nil {
		return err
	}

	for i, w := range []string{"gateway", "consumer", "consumer", "relay", "projector", "compensator", "scanner", "canceller", "payments"} {
		args := []string{w}
		switch w {
		case "canceller":
			args = append(args, "-provider-url", "http://"+channelAddr)
		case "payments":
			args = append(args, "-addr", paymentsAddr, "-payment-keys", "sim:"+payKey, "-relookup", "2s")
		}
		if w != "gateway" && w != "payments" { // these serve /metrics on their API port
			args = append(args, "-metrics-addr", fmt.Sprintf("127.0.0.1:%d", demoMetricsPort+i))
		}
		if err := procs.Start(bin, roles.Env(w, common), logf, args...); err != nil {
			return err
		}
	}
	fmt.Printf("workloads running: gateway, 2 × consumer, relay, projector, compensator, scanner, canceller, payments (log: %s)\n", logf.Name())
	if err := salekit.WaitHTTP("http://" + addr + "/readyz"); err != nil {
		return err
	}

	// The buyers.
	type result struct {
		code    string
		latency time.Duration
	}
	var mu sync.Mutex
	var results []result
	accepted := map[string]time.Time{}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	// Skewed on purpose: three buyers in five hash to bucket 0, which
	// empties first and borrows stock from its siblings (SOLD_OUT only when
	// the SKU is sold out).
	users := make([]int64, 0, buyers)
	for id := int64(80000000); len(users) < buyers; id++ {
		if len(users)%5 >= 3 || nBuckets == 1 || redisstore.BucketFor(id, nBuckets) == 0 {
			users = append(users, id)
		}
	}
	for i, user := range users {
		if buyerRate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / buyerRate * float64(time.Second)))))
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(user int64) {
			defer wg.Done()
			defer func() { <-sem }()
			sku := skus[user%2]
			token := gateway.SignToken(user, []byte(tokenKey), time.Now().Add(time.Hour))
			body := `{"request_id":"` + ids.NewRandom().String() + `"}`
			tries := 1 + int(user%4/3) // a quarter of the clients retry the same request
			for i := 0; i < tries; i++ {
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/v1/activities/%d/skus/%d/reservations", addr, activity, sku), bytes.NewBufferString(body))
				req.Header.Set("Authorization", "Bearer "+token)
				t0 := time.Now()
				resp, err := client.Do(req)
				d := time.Since(t0)
				if err != nil {
					mu.Lock()
					results = append(results, result{"TRANSPORT_ERROR", d})
					mu.Unlock()
					continue
				}
				var a struct {
					Code string `json:"code"`
					RID  string `json:"reservation_id"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&a)
				_ = resp.Body.Close()
				mu.Lock()
				results = append(results, result{a.Code, d})
				if a.Code == gateway.CodeQueued {
					if _, seen := accepted[a.RID]; !seen {
						accepted[a.RID] = t0
					}
				}
				mu.Unlock()
			}
		}(user)
	}
	wg.Wait()
	elapsed := time.Since(start)
	fmt.Printf("\n%d HTTP requests from %d buyers in %s (%.0f req/s)\n", len(results), buyers, elapsed.Round(time.Millisecond), float64(len(results))/elapsed.Seconds())

	// Convergence: every QUEUED reservation reaches a terminal state and its
	// compensation, if any, is done (the invariants judge it at the end).
	src := invariants.Sources{Pool: pool, Redis: rs}
	if _, err := invariants.Await(ctx, src, activity, demoSKUs, invariants.Expect{Settled: true}, 2*time.Minute); err != nil {
		return err
	}
	converged := time.Since(start)

	codes := map[string]int{}
	lat := make([]time.Duration, 0, len(results))
	for _, r := range results {
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
	var sold, rejected, compensated, manual int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM orders WHERE activity_id = $1),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status IN ('ORDER_REJECTED', 'COMPENSATING', 'COMPENSATED')),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status = 'COMPENSATED'),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND status = 'MANUAL_REVIEW')`, activity).Scan(&sold, &rejected, &compensated, &manual); err != nil {
		return fmt.Errorf("reading the outcome: %w", err)
	}
	var p50, p99 float64
	if err := pool.QueryRow(ctx, `SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0)
		FROM (SELECT extract(epoch FROM o.created_at - r.reserved_at) * 1000 AS ms FROM orders o JOIN inventory_reservation r USING (reservation_id) WHERE o.activity_id = $1) x`, activity).Scan(&p50, &p99); err != nil {
		return fmt.Errorf("reading reservation → order latency: %w", err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("\norders created          %d\nrejected by PostgreSQL  %d (compensated in Redis: %d, manual review: %d)\n", sold, rejected, compensated, manual)
	fmt.Printf("reserve latency (HTTP)  p50 %s  p99 %s\n", lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	fmt.Printf("reservation → order     p50 %.1f ms  p99 %.1f ms\n", p50, p99)
	fmt.Printf("all settled after       %s\n", converged.Round(time.Millisecond))

	// Payments: three buyers in five pay, at some point within 1.5 payment
	// windows — the late ones find the payment closed by the timeout cancel.
	rows, err := pool.Query(ctx, `SELECT order_id, user_id, amount_cents, currency FROM orders WHERE activity_id = $1`, activity)
	if err != nil {
		return err
	}
	type ord struct {
		id       uuid.UUID
		user     int64
		amount   int64 // what the merchant asks the channel to charge
		currency string
	}
	var orders []ord
	for rows.Next() {
		var o ord
		if err := rows.Scan(&o.id, &o.user, &o.amount, &o.currency); err != nil {
			return err
		}
		orders = append(orders, o)
	}
	rows.Close()
	var refused, payErrors int
	var pwg sync.WaitGroup
	for _, o := range orders {
		if o.user%5 >= 3 {
			continue // never pays: the timer cancels the order
		}
		pwg.Add(1)
		go func(o ord) {
			defer pwg.Done()
			time.Sleep(time.Duration(o.user%7) * paymentWindow * 3 / 14) // 0 … 1.3 windows
			_, err := channel.Pay(ctx, o.id, o.amount, o.currency)
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
	pwg.Wait()
	// Every order ends PAID or CANCELLED, and the sale settles again.
	payDeadline := time.Now().Add(paymentWindow + 90*time.Second)
	var unsettled int
	for {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE activity_id = $1 AND status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')`, activity).Scan(&unsettled); err != nil {
			return fmt.Errorf("reading the open orders: %w", err)
		}
		if unsettled == 0 || !time.Now().Before(payDeadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	report, err := invariants.Await(ctx, src, activity, demoSKUs, invariants.Expect{Settled: true}, 30*time.Second)
	if err != nil {
		return err
	}
	var paid, cancelled, refunding int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'PAID'),
		(SELECT count(*) FROM orders WHERE activity_id = $1 AND status = 'CANCELLED'),
		(SELECT count(*) FROM payment_record p JOIN orders o USING (order_id) WHERE o.activity_id = $1 AND p.status = 'REFUNDING')`,
		activity).Scan(&paid, &cancelled, &refunding); err != nil {
		return fmt.Errorf("reading how the orders ended: %w", err)
	}
	fmt.Printf("\nhow the orders ended\n  PAID                   %d\n  CANCELLED              %d (%d of them tried to pay after the timeout and were refused by the channel)\n  paid after cancel      %d (refund flow)\n  still open             %d\n",
		paid, cancelled, refused, refunding, unsettled)
	if payErrors > 0 {
		fmt.Printf("  payment calls that failed otherwise: %d\n", payErrors)
	}

	// Invariants (package invariants), and what this sale promised besides.
	var accounted int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1`, activity).Scan(&accounted); err != nil {
		return fmt.Errorf("reading the reservations: %w", err)
	}
	report.Add("every QUEUED reservation recorded in PostgreSQL", accounted == int64(len(accepted)), "%d of %d", accounted, len(accepted))
	report.Add("every order ended PAID or CANCELLED", unsettled == 0 && paid+cancelled == sold, "%d + %d = %d", paid, cancelled, sold)
	fmt.Println("\ninvariants (PostgreSQL and Redis)")
	fmt.Print(report.String())
	failed := !report.OK()
	// The safety net on the sale that just ran, as the operator's final Job runs it.
	fmt.Println("\nreconcile job (seckill reconcile -final, the operator's final Job)")
	rec := salekit.Cmd(bin, roles.Env("reconcile", common), "reconcile", "-final", "-watermark-lag", "0s")
	rec.Stdout, rec.Stderr = os.Stdout, os.Stdout
	if err := rec.Run(); err != nil {
		fmt.Printf("  reconcile: %v\n", err)
		failed = true
	}
	if failed {
		return fmt.Errorf("an invariant failed (workload log: %s)", logf.Name())
	}
	return nil
}

// demoMetricsPort+i is where the i-th worker serves /metrics.
const demoMetricsPort = 19090
