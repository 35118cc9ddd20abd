package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/hack/salekit"
	"github.com/seckill/seckill-operator/internal/testenv/pgproxy"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/mq/admin"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

const (
	sku          = int64(1)
	buckets      = 2
	gatewayAddr  = "127.0.0.1:28190"
	channelAddr  = "127.0.0.1:28191"
	paymentsAddr = "127.0.0.1:28192"
	// chaosRetries is the scenario groups' retry limit: nothing goes to
	// the DLQ during a fault (the workloads' -max-attempts is one more).
	chaosRetries = 64
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
	// mq is the scenario's own topics and groups (openMessaging).
	mq    names.Messaging
	admin *admin.Client
}

// openMessaging creates the scenario's own topics and groups, named after
// its activity as the operator names an activity's: a scenario never
// inherits what an earlier one (or an interrupted run) left on shared
// topics — a backlog it would first have to work off.
func (s *sale) openMessaging(ctx context.Context) error {
	s.admin = &admin.Client{NameServer: salekit.Env("SECKILL_RMQ_NAMESRV"), Timeout: 10 * time.Second,
		AccessKey: salekit.Env(names.EnvRMQAccessKey), SecretKey: salekit.Env(names.EnvRMQSecretKey)}
	s.mq = names.ForActivity(strconv.FormatInt(s.activity, 10))
	for _, t := range []admin.Topic{{Name: s.mq.CreateTopic, Type: admin.Normal}, {Name: s.mq.EventsTopic, Type: admin.Normal},
		{Name: s.mq.CancelTopic, Type: admin.Delay}} {
		if err := s.admin.CreateTopic(ctx, t); err != nil {
			return fmt.Errorf("the scenario's topic %s: %w", t.Name, err)
		}
	}
	for _, g := range []string{s.mq.ConsumerGroup, s.mq.ProjectorGroup, s.mq.CancellerGroup} {
		if err := s.admin.CreateGroup(ctx, admin.Group{Name: g, RetryMaxTimes: chaosRetries}); err != nil {
			return fmt.Errorf("the scenario's consumer group %s: %w", g, err)
		}
	}
	return nil
}

// closeMessaging deletes what openMessaging created; a failure is
// reported (the names are the scenario's alone, so it harms no later one).
func (s *sale) closeMessaging() {
	if s.admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, t := range []string{s.mq.CreateTopic, s.mq.EventsTopic, s.mq.CancelTopic} {
		errs = append(errs, s.admin.DeleteTopic(ctx, t))
	}
	for _, g := range []string{s.mq.ConsumerGroup, s.mq.ProjectorGroup, s.mq.CancellerGroup} {
		errs = append(errs, s.admin.DeleteGroup(ctx, g))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: deleting the scenario's topics and groups: %v\n", err)
	}
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
	// Debug: the once-per-message events of §12.1 too, which the run's
	// event report looks for (eventsSeen).
	common = append(common, "SECKILL_LOG_LEVEL=debug")
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
	if err := s.openMessaging(ctx); err != nil {
		s.close()
		return nil, err
	}
	attempts := strconv.Itoa(chaosRetries + 1)
	consumer := append(s.mq.Args("consumer"), "-invisible", "3s", "-max-attempts", attempts, "-metrics-addr", "0")
	workloads := []struct {
		name string
		args []string
	}{
		{"provider-sim", []string{"-addr", channelAddr, "-callback-url", "http://" + paymentsAddr, "-payment-keys", "sim:" + payKey, "-duplicates", "1"}},
		{"gateway", append(s.mq.Args("gateway"), "-resend-after", resendAfter)},
		{"consumer", consumer},
		{"consumer", consumer},
		{"relay", append(s.mq.Args("relay"), "-lease", "5s", "-metrics-addr", "0")},
		{"projector", append(s.mq.Args("projector"), "-invisible", "3s", "-max-attempts", attempts, "-metrics-addr", "0")},
		{"compensator", []string{"-lease", "5s", "-metrics-addr", "0"}},
		{"scanner", append(s.mq.Args("scanner"), "-resend-after", resendAfter, "-metrics-addr", "0")},
		{"canceller", append(s.mq.Args("canceller"), "-provider-url", "http://"+channelAddr, "-invisible", "3s", "-max-attempts", attempts, "-metrics-addr", "0")},
		{"payments", append(s.mq.Args("payments"), "-addr", paymentsAddr, "-payment-keys", "sim:"+payKey, "-relookup", "2s")},
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
	s.closeMessaging()
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
