package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/cancel"
	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/pipeline"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

type runner interface{ Run(context.Context) error }

// worker parses the flags of one pipeline worker, checks them, builds it and
// runs it until the process is told to stop.
func worker(ctx context.Context, name string, args []string) error {
	var c config.Common
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c.Bind(fs)
	host, _ := os.Hostname()
	owner := fs.String("owner", fmt.Sprintf("%s-%s-%d", name, host, os.Getpid()), "lease owner id")
	createTopic := fs.String("create-topic", names.TopicOrderCreate, "order-create topic")
	eventsTopic := fs.String("events-topic", names.TopicOrderEvents, "order events topic")
	cancelTopic := fs.String("cancel-topic", names.TopicOrderCancel, "timeout-cancel timers topic (DELAY)")
	providerURL := fs.String("provider-url", os.Getenv("SECKILL_PROVIDER_URL"), "canceller: the payment channel's merchant API ($SECKILL_PROVIDER_URL)")
	providerName := fs.String("provider-name", envOr("SECKILL_PROVIDER_NAME", "sim"), "canceller: the channel's name in payment_record")
	group := fs.String("group", "", "consumer group (default per worker)")
	lease := fs.Duration("lease", 30*time.Second, "lease duration")
	invisible := fs.Duration("invisible", 30*time.Second, "how long a received message stays invisible before redelivery")
	metricsAddr := fs.String("metrics-addr", envOr(names.EnvMetricsAddr, fmt.Sprintf(":%d", names.DefaultPorts[name])),
		"listen address of /metrics, /healthz, /readyz (\"0\": off) ($"+names.EnvMetricsAddr+")")
	once := fs.Bool("once", false, "compensator: run until no task is due, then exit (a scheduled sweep)")
	maxAttempts := fs.Int("max-attempts", names.RetryLimit+1, "deliveries the consumer group allows before its DLQ (retry limit + 1)")
	resendAfter := fs.Duration("resend-after", DefaultResendAfter, "scanner: send a sent reservation again, same id, when PostgreSQL has not decided it after this long (doubling with each send; 0: never)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	need := map[string]config.Need{
		"consumer":    {PG: true, RMQ: true},
		"relay":       {PG: true, RMQ: true},
		"projector":   {PG: true, Redis: true, RMQ: true},
		"compensator": {PG: true, Redis: true},
		"scanner":     {Redis: true, RMQ: true, Slots: true},
		"canceller":   {PG: true, RMQ: true},
	}[name]
	if err := c.Check(need); err != nil {
		return usageError{err}
	}
	if name == "canceller" && *providerURL == "" {
		return usageError{fmt.Errorf("-provider-url is required for the canceller")}
	}
	if *lease <= 0 || *invisible < time.Second || *maxAttempts < 1 || *resendAfter < 0 || (*resendAfter > 0 && *resendAfter < 5*time.Second) {
		return usageError{fmt.Errorf("-lease must be positive, -invisible at least 1s, -max-attempts at least 1, -resend-after 0 or at least 5s")}
	}
	log := c.Logger(name).With("owner", *owner)
	flushTraces, err := c.Tracing(ctx, name)
	if err != nil {
		return err
	}
	defer flushTraces()

	var closers []func() error
	defer closeAll(&closers)
	all := metrics.Registry()
	ob := &observe{reg: metrics.ForActivity(all, c.ActivityID), health: &metrics.Health{Stale: 2 * time.Minute}}
	var w runner
	switch name {
	case "consumer":
		w, err = buildConsumer(ctx, &c, &closers, ob, *group, *createTopic, *eventsTopic, *cancelTopic, *invisible, *maxAttempts, log)
	case "relay":
		w, err = buildRelay(ctx, &c, &closers, ob, *owner, *lease, *eventsTopic, *cancelTopic, log)
	case "projector":
		w, err = buildProjector(ctx, &c, &closers, ob, *group, *eventsTopic, *invisible, log)
	case "compensator":
		w, err = buildCompensator(ctx, &c, &closers, ob, *owner, *lease, *once, log)
	case "canceller":
		w, err = buildCanceller(ctx, &c, &closers, ob, *group, *cancelTopic, *eventsTopic, *invisible, &provider.Client{ProviderName: *providerName, BaseURL: *providerURL}, log)
	case "scanner":
		w, err = buildScanner(ctx, &c, &closers, ob, *createTopic, *resendAfter, log)
	}
	if err != nil {
		return err
	}
	// The worker stops when the metrics server cannot listen: a worker its
	// probes cannot see would be restarted by the kubelet anyway.
	rctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		serr := metrics.Serve(rctx, *metricsAddr, metrics.Handler(all, ob.health))
		stop()
		served <- serr
	}()
	log.Info("started", "metrics_addr", *metricsAddr)
	err = w.Run(rctx)
	stop()
	if serr := <-served; serr != nil && err == nil {
		err = serr
	}
	log.Info("stopped")
	return err
}

// observe is what every worker reports through: where it registers its
// metrics (prefixed, labelled with the activity) and the health its probes
// read.
type observe struct {
	reg    prometheus.Registerer
	health *metrics.Health
}

// closeAll closes what a command opened, last opened first. Deferred with
// the slice variable, so it sees the closers appended later: pass a pointer.
func closeAll(closers *[]func() error) {
	for i := len(*closers) - 1; i >= 0; i-- {
		_ = (*closers)[i]()
	}
}

// openConsumer starts a consumer of group on topics and registers it for closing.
func openConsumer(c *config.Common, closers *[]func() error, group string, topics ...string) (*mq.Consumer, error) {
	cons, err := mq.NewConsumer(c.RMQEndpoint, group, topics...)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, cons.Close)
	return cons, nil
}

// openProducer starts a producer for topics and registers it for closing.
func openProducer(c *config.Common, closers *[]func() error, topics ...string) (*mq.Producer, error) {
	prod, err := mq.NewProducer(c.RMQEndpoint, topics...)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, prod.Close)
	return prod, nil
}

// openPG connects to PostgreSQL and registers the pool for closing.
func openPG(ctx context.Context, c *config.Common, closers *[]func() error) (*pgxpool.Pool, error) {
	pool, err := c.Postgres(ctx)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, func() error { pool.Close(); return nil })
	return pool, nil
}

// openRedis connects to Redis, loads the scripts once and registers the
// client for closing.
func openRedis(ctx context.Context, c *config.Common, closers *[]func() error) (redis.UniversalClient, error) {
	rdb, err := c.Redis()
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, rdb.Close)
	if err := redisstore.LoadScripts(ctx, rdb); err != nil {
		return nil, err
	}
	return rdb, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func buildConsumer(ctx context.Context, c *config.Common, closers *[]func() error, ob *observe, group, createTopic, eventsTopic, cancelTopic string, invisible time.Duration, maxAttempts int, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	group = orDefault(group, names.GroupOrderConsumer)
	cons, err := openConsumer(c, closers, group, createTopic)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &pipeline.OrderConsumer{MQ: cons, Invisible: invisible, Log: log.With(logs.ConsumerGroup, group), MaxAttempts: maxAttempts,
		Metrics: metrics.NewConsumer(ob.reg, group), Health: ob.health,
		ID: fmt.Sprintf("%s-%d", host, os.Getpid()), ActivityID: c.ActivityID,
		Store: &orderstore.Consumer{Pool: pool, Group: group, EventsTopic: eventsTopic, CancelTopic: cancelTopic,
			Failpoint: failpoint}}, nil
}

func buildRelay(ctx context.Context, c *config.Common, closers *[]func() error, ob *observe, owner string, lease time.Duration, eventsTopic, cancelTopic string, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	prod, err := openProducer(c, closers, eventsTopic, cancelTopic)
	if err != nil {
		return nil, err
	}
	store := &outbox.Store{Pool: pool, Owner: owner, Lease: lease, MaxAttempts: 20}
	ob.reg.MustRegister(metrics.NewBacklog("outbox", "Outbox events not yet sent", store.Backlog))
	return &pipeline.Relay{Producer: prod, Batch: 64, Log: log, Store: store,
		Metrics: metrics.NewRelay(ob.reg), Health: ob.health, Failpoint: failpoint}, nil
}

func buildProjector(ctx context.Context, c *config.Common, closers *[]func() error, ob *observe, group, eventsTopic string, invisible time.Duration, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	rdb, err := openRedis(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	group = orDefault(group, names.GroupProjector)
	cons, err := openConsumer(c, closers, group, eventsTopic)
	if err != nil {
		return nil, err
	}
	return &pipeline.Projector{MQ: cons, Redis: redisstore.New(rdb), Pool: pool, Group: group, Invisible: invisible, Log: log.With(logs.ConsumerGroup, group),
		Metrics: metrics.NewProjector(ob.reg), Health: ob.health}, nil
}

func buildCompensator(ctx context.Context, c *config.Common, closers *[]func() error, ob *observe, owner string, lease time.Duration, once bool, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	rdb, err := openRedis(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	w := &compensation.Worker{Pool: pool, Redis: redisstore.New(rdb),
		Owner: owner, Lease: lease, MaxAttempts: 20, TerminalTTL: 30 * 24 * time.Hour, Failpoint: failpoint}
	ob.reg.MustRegister(metrics.NewBacklog("compensation", "Compensation tasks not yet applied", w.Backlog))
	return &pipeline.Compensator{Batch: 32, Log: log, Worker: w, Metrics: metrics.NewCompensator(ob.reg), Health: ob.health, Once: once}, nil
}

// DefaultResendAfter is how long a sent reservation may stay undecided in
// PostgreSQL before the scanner sends its message again (same id): well
// above a healthy sale's reservation → order time (seconds) and its
// projection lag (tens of seconds under a backlog), so that a resend is
// rare and means the broker lost sight of a delivery.
const DefaultResendAfter = 2 * time.Minute

func buildScanner(ctx context.Context, c *config.Common, closers *[]func() error, ob *observe, createTopic string, resendAfter time.Duration, log *slog.Logger) (runner, error) {
	slots, err := c.Slots()
	if err != nil {
		return nil, usageError{err}
	}
	rdb, err := openRedis(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	prod, err := openProducer(c, closers, createTopic)
	if err != nil {
		return nil, err
	}
	rs := redisstore.New(rdb)
	ob.reg.MustRegister(metrics.NewBacklog("reservation_send", "Reservations whose order-create message is due to be sent: a first send overdue, a resend, or a sent one still undecided past -resend-after",
		func(ctx context.Context) (int64, time.Duration, error) { return rs.SendBacklog(ctx, slots, time.Now()) }))
	return &pipeline.SendScanner{Redis: rs, Producer: prod, Topic: createTopic, Slots: slots, ResendAfter: resendAfter,
		Lease: 10 * time.Second, Batch: 64, Log: log, Metrics: metrics.NewScanner(ob.reg), Health: ob.health}, nil
}

func buildCanceller(ctx context.Context, c *config.Common, closers *[]func() error, ob *observe, group, cancelTopic, eventsTopic string,
	invisible time.Duration, ch provider.Channel, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	group = orDefault(group, names.GroupCanceller)
	cons, err := openConsumer(c, closers, group, cancelTopic)
	if err != nil {
		return nil, err
	}
	return &pipeline.Canceller{MQ: cons, Group: group, Invisible: invisible, Log: log.With(logs.ConsumerGroup, group), Health: ob.health, RefundEvery: 10 * time.Second,
		Cancel: &cancel.Canceller{Pool: pool, Channel: ch, Payments: &payment.Store{Pool: pool, EventsTopic: eventsTopic, Failpoint: failpoint},
			EventsTopic: eventsTopic, Failpoint: failpoint}}, nil
}
