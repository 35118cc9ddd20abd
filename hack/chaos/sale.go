package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/hack/salekit"
	"github.com/seckill/seckill-operator/internal/testenv/pgproxy"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

const (
	sku          = int64(1)
	buckets      = 2
	gatewayAddr  = "127.0.0.1:28190"
	channelAddr  = "127.0.0.1:28191"
	paymentsAddr = "127.0.0.1:28192"
	topicCreate  = "seckill-chaos-create"
	topicEvents  = "seckill-chaos-events"
	topicCancel  = "seckill-chaos-cancel"
	// paymentWindow is short, so that orders expire and are cancelled
	// during the scenario (the canceller's failpoint needs them).
	paymentWindow = 8 * time.Second
	// resendAfter is the scanner's verification of sent reservations
	// (default 2 min), shorter so that a sale settles within -settle.
	resendAfter = "30s"
	// guardAfter is the backlog guard's threshold in the backlog scenario.
	guardAfter = 6 * time.Second
)

// sale is one scenario's sale on the local stack.
type sale struct {
	activity int64
	pgStock  int64
	procs    map[string][]*proc
	all      []*proc
	pool     *pgxpool.Pool
	rdb      redis.UniversalClient
	rs       *redisstore.Store
	roles    *salekit.Roles
	traffic  *traffic
	channel  *provider.Client
	proxy    *pgproxy.Proxy
	guard    *guardWatch
	log      *os.File
	bin      string
	common   []string
}

// openSale provisions a fresh activity and starts every workload. pgStock
// below the Redis stock makes PostgreSQL reject (and Redis compensate) once
// it runs out; viaProxy puts the first order consumer's PostgreSQL
// connections through a fault-injecting proxy.
// sc.sentinel runs every workload (and the harness) in sentinel mode;
// sc.backlog adds the backlog guard and watches its flag.
func openSale(ctx context.Context, c config, bin, dir string, sc scenario, pgStock, redisStock int64) (*sale, error) {
	name, viaProxy, viaSentinel := sc.name, sc.commitLoss, sc.sentinel
	s := &sale{activity: time.Now().UnixMilli() % 1_000_000_000_000, pgStock: pgStock, procs: map[string][]*proc{}}
	tokenKey, payKey := salekit.RandomHex(32), salekit.RandomHex(32)
	common := salekit.SaleEnv(s.activity, fmt.Sprintf("%d:%d", sku, buckets), tokenKey, gatewayAddr)
	if viaSentinel {
		common = append(common, salekit.SentinelEnv()...)
	}
	for _, args := range [][]string{{"activity", "provision", "-stock", fmt.Sprintf("%d=%d", sku, pgStock), "-price", fmt.Sprintf("%d=100", sku), "-currency", "CNY"},
		{"activity", "window", "-state", "ACTIVE", "-payment-window", paymentWindow.String()}} {
		if out, err := salekit.Cmd(bin, common, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("seckill %s %s: %w\n%s", args[0], args[1], err, out)
		}
	}
	var err error
	if s.pool, err = pgxpool.New(ctx, salekit.Env("SECKILL_PG_DSN")); err != nil {
		return nil, err
	}
	if viaSentinel {
		s.rdb = salekit.SentinelClient()
	} else {
		s.rdb = redis.NewClient(salekit.RedisOptions())
	}
	s.rs = redisstore.New(s.rdb)
	// Redis may hold more than PostgreSQL: the units PostgreSQL lacks are
	// rejected there and given back in Redis (compensation).
	if redisStock > pgStock {
		for b, target := range control.BucketTargets(redisStock, buckets) {
			if _, _, err := s.rs.Provision(ctx, redisstore.Slots(s.activity, sku, buckets)[b], target, 2); err != nil {
				s.close()
				return nil, err
			}
		}
	}
	if s.roles, err = salekit.NewRoles(bin, common, dir); err != nil {
		s.close()
		return nil, err
	}
	if s.log, err = os.Create(filepath.Join(dir, name+".log")); err != nil { //nolint:gosec // our log directory
		s.close()
		return nil, err
	}
	s.channel = &provider.Client{ProviderName: "sim", BaseURL: "http://" + channelAddr}
	consumer := []string{"-create-topic", topicCreate, "-events-topic", topicEvents, "-cancel-topic", topicCancel,
		"-group", "seckill-chaos-consumer", "-invisible", "3s", "-max-attempts", "65", "-metrics-addr", "0"}
	workloads := []struct {
		name string
		args []string
	}{
		{"provider-sim", []string{"-addr", channelAddr, "-callback-url", "http://" + paymentsAddr, "-payment-keys", "sim:" + payKey, "-duplicates", "1"}},
		{"gateway", []string{"-create-topic", topicCreate, "-resend-after", resendAfter}},
		{"consumer", consumer},
		{"consumer", consumer},
		{"relay", []string{"-events-topic", topicEvents, "-cancel-topic", topicCancel, "-lease", "5s", "-metrics-addr", "0"}},
		{"projector", []string{"-events-topic", topicEvents, "-group", "seckill-chaos-projector", "-invisible", "3s", "-max-attempts", "65", "-metrics-addr", "0"}},
		{"compensator", []string{"-lease", "5s", "-metrics-addr", "0"}},
		{"scanner", []string{"-create-topic", topicCreate, "-resend-after", resendAfter, "-metrics-addr", "0"}},
		{"canceller", []string{"-cancel-topic", topicCancel, "-events-topic", topicEvents, "-group", "seckill-chaos-canceller",
			"-provider-url", "http://" + channelAddr, "-invisible", "3s", "-max-attempts", "65", "-metrics-addr", "0"}},
		{"payments", []string{"-addr", paymentsAddr, "-payment-keys", "sim:" + payKey, "-events-topic", topicEvents, "-relookup", "2s"}},
	}
	for _, w := range workloads {
		env := s.roles.Env(w.name, common)
		if w.name == "provider-sim" {
			env = common
		}
		if viaProxy && w.name == "consumer" && s.proxy == nil {
			dsn := lookup(env, "SECKILL_PG_DSN")
			if s.proxy, err = pgproxy.Start(dsn); err != nil {
				s.close()
				return nil, err
			}
			env = append(env, "SECKILL_PG_DSN="+s.proxy.DSN())
		}
		p := &proc{name: w.name, bin: bin, args: append([]string{w.name}, w.args...), env: env, log: s.log}
		if err := p.run(ctx); err != nil {
			s.close()
			return nil, err
		}
		s.procs[w.name] = append(s.procs[w.name], p)
		s.all = append(s.all, p)
	}
	if sc.backlog {
		// The operator's guard, as it runs without Kubernetes; a threshold
		// the 15-s freeze passes (the operator's default is 2 min).
		p := &proc{name: "guard", bin: bin, args: []string{"activity", "guard", "-pause-after", guardAfter.String(), "-every", "1s"},
			env: common, log: s.log}
		if err := p.run(ctx); err != nil {
			s.close()
			return nil, err
		}
		s.all = append(s.all, p)
		s.guard = &guardWatch{}
		go s.guard.watch(ctx, s.pool, s.activity)
	}
	if err := salekit.WaitHTTP("http://" + gatewayAddr + "/readyz"); err != nil {
		s.close()
		return nil, err
	}
	s.traffic = newTraffic(gatewayAddr, s.activity, sku, tokenKey, c.rate)
	s.bin, s.common = bin, common
	return s, nil
}

// reconcileEvery runs the reconcile job every period until ctx ends, as the
// operator's CronJob does during a sale (design.md#reconcile): what a crash left for
// it (a projection event a dead consumer took away, say) is repaired by the
// job, counted in the table as its repairs.
func (s *sale) reconcileEvery(ctx context.Context, period time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
		cmd := salekit.Cmd(s.bin, s.roles.Env("reconcile", s.common), "reconcile") // the CronJob's default watermark lag (1 min)
		cmd.Stdout, cmd.Stderr = s.log, s.log
		if err := cmd.Run(); err != nil && ctx.Err() == nil {
			fmt.Fprintf(s.log, "chaos: reconcile run: %v\n", err)
		}
	}
}

// ordersCurrent waits, up to within, until the orders PostgreSQL made in
// the last 2 s were all for reservations made less than 3 s before them,
// and says how long after from that was (ok false: not within).
func (s *sale) ordersCurrent(ctx context.Context, from time.Time, within time.Duration) (time.Duration, bool, error) {
	for {
		var n int64
		var lag float64
		if err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(max(extract(epoch FROM o.created_at - r.reserved_at)), 0)::float8
			FROM orders o JOIN inventory_reservation r USING (reservation_id)
			WHERE o.activity_id = $1 AND o.created_at > clock_timestamp() - interval '2 seconds'`, s.activity).Scan(&n, &lag); err != nil {
			return 0, false, fmt.Errorf("reading the orders' lag: %w", err)
		}
		since := time.Since(from)
		if n > 0 && lag < 3 {
			return since, true, nil
		}
		if since > within {
			return since, false, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// lookup is the last KEY=value of env.
func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// pay pays, through the simulated channel, every other order of the sale
// that is waiting for payment, until ctx ends: the channel posts its
// signed callback to the payments workload (twice), and the canceller
// finds a success the callback could not deliver.
func (s *sale) pay(ctx context.Context) {
	tried := map[uuid.UUID]bool{}
	for ctx.Err() == nil {
		rows, err := s.pool.Query(ctx, `SELECT order_id, amount_cents, currency FROM orders
			WHERE activity_id = $1 AND status = 'CREATED' AND user_id % 2 = 0 ORDER BY created_at LIMIT 50`, s.activity)
		if err == nil {
			type due struct {
				id       uuid.UUID
				amount   int64
				currency string
			}
			var list []due
			for rows.Next() {
				var d due
				if rows.Scan(&d.id, &d.amount, &d.currency) == nil && !tried[d.id] {
					list = append(list, d)
				}
			}
			rows.Close()
			for _, d := range list {
				tried[d.id] = true
				_, _ = s.channel.Pay(ctx, d.id, d.amount, d.currency) // a refused or failed payment is the buyer's problem
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (s *sale) close() {
	if s.guard != nil {
		s.guard.stop()
	}
	for _, p := range s.all {
		p.stop()
	}
	if s.proxy != nil {
		_ = s.proxy.Close()
	}
	if s.roles != nil {
		s.roles.Close()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.log != nil {
		_ = s.log.Close()
	}
}
