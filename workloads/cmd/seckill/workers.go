package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/compensation"
	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/outbox"
	"github.com/seckill/seckill-operator/workloads/pipeline"
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
	group := fs.String("group", "", "consumer group (default per worker)")
	lease := fs.Duration("lease", 30*time.Second, "lease duration")
	invisible := fs.Duration("invisible", 30*time.Second, "how long a received message stays invisible before redelivery")
	paymentWindow := fs.Duration("payment-window", 15*time.Minute, "how long a new order waits for payment")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	need := map[string]config.Need{
		"consumer":    {PG: true, RMQ: true},
		"relay":       {PG: true, RMQ: true},
		"projector":   {PG: true, Redis: true, RMQ: true},
		"compensator": {PG: true, Redis: true},
		"scanner":     {Redis: true, RMQ: true, Slots: true},
	}[name]
	if err := c.Check(need); err != nil {
		return usageError{err}
	}
	if *lease <= 0 || *paymentWindow <= 0 || *invisible < time.Second {
		return usageError{fmt.Errorf("-lease and -payment-window must be positive, -invisible at least 1s")}
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("workload", name, "owner", *owner)

	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}()
	var w runner
	var err error
	switch name {
	case "consumer":
		w, err = buildConsumer(ctx, &c, &closers, *group, *createTopic, *eventsTopic, *paymentWindow, *invisible, log)
	case "relay":
		w, err = buildRelay(ctx, &c, &closers, *owner, *lease, *eventsTopic, log)
	case "projector":
		w, err = buildProjector(ctx, &c, &closers, *group, *eventsTopic, *invisible, log)
	case "compensator":
		w, err = buildCompensator(ctx, &c, &closers, *owner, *lease, log)
	case "scanner":
		w, err = buildScanner(ctx, &c, &closers, *createTopic, log)
	}
	if err != nil {
		return err
	}
	log.Info("started")
	err = w.Run(ctx)
	log.Info("stopped")
	return err
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
	rdb := c.Redis()
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

func buildConsumer(ctx context.Context, c *config.Common, closers *[]func() error, group, createTopic, eventsTopic string, pw, invisible time.Duration, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	group = orDefault(group, names.GroupOrderConsumer)
	cons, err := mq.NewConsumer(c.RMQEndpoint, group, createTopic)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, cons.Close)
	host, _ := os.Hostname()
	return &pipeline.OrderConsumer{MQ: cons, Invisible: invisible, Log: log,
		ID: fmt.Sprintf("%s-%d", host, os.Getpid()), ActivityID: c.ActivityID,
		Store: &orderstore.Consumer{Pool: pool, Group: group, PaymentWindow: pw, EventsTopic: eventsTopic,
			Failpoint: failpoint}}, nil
}

func buildRelay(ctx context.Context, c *config.Common, closers *[]func() error, owner string, lease time.Duration, eventsTopic string, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	prod, err := mq.NewProducer(c.RMQEndpoint, eventsTopic)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, prod.Close)
	return &pipeline.Relay{Producer: prod, Batch: 64, Log: log,
		Store: &outbox.Store{Pool: pool, Owner: owner, Lease: lease, MaxAttempts: 20}}, nil
}

func buildProjector(ctx context.Context, c *config.Common, closers *[]func() error, group, eventsTopic string, invisible time.Duration, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	rdb, err := openRedis(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	group = orDefault(group, names.GroupProjector)
	cons, err := mq.NewConsumer(c.RMQEndpoint, group, eventsTopic)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, cons.Close)
	return &pipeline.Projector{MQ: cons, Redis: redisstore.New(rdb), Pool: pool, Group: group, Invisible: invisible, Log: log}, nil
}

func buildCompensator(ctx context.Context, c *config.Common, closers *[]func() error, owner string, lease time.Duration, log *slog.Logger) (runner, error) {
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	rdb, err := openRedis(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	return &pipeline.Compensator{Batch: 32, Log: log, Worker: &compensation.Worker{Pool: pool, Redis: redisstore.New(rdb),
		Owner: owner, Lease: lease, MaxAttempts: 20, TerminalTTL: 30 * 24 * time.Hour, Failpoint: failpoint}}, nil
}

func buildScanner(ctx context.Context, c *config.Common, closers *[]func() error, createTopic string, log *slog.Logger) (runner, error) {
	slots, err := c.Slots()
	if err != nil {
		return nil, usageError{err}
	}
	rdb, err := openRedis(ctx, c, closers)
	if err != nil {
		return nil, err
	}
	prod, err := mq.NewProducer(c.RMQEndpoint, createTopic)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, prod.Close)
	return &pipeline.SendScanner{Redis: redisstore.New(rdb), Producer: prod, Topic: createTopic, Slots: slots,
		Lease: 10 * time.Second, Batch: 64, Log: log}, nil
}
