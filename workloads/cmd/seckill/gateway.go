package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/tokens"
)

func runGateway(ctx context.Context, args []string) error {
	var c config.Common
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	c.Bind(fs)
	addr := fs.String("addr", envOr(names.EnvHTTPAddr, ":"+strconv.Itoa(names.DefaultPorts["gateway"])), "listen address ($"+names.EnvHTTPAddr+")")
	metricsAddr := fs.String("metrics-addr", envOr(names.EnvMetricsAddr, ":"+strconv.Itoa(names.DefaultPorts["gateway-metrics"])),
		"listen address of /metrics, /healthz, /readyz, apart from the API (\"0\": off) ($"+names.EnvMetricsAddr+")")
	topic := fs.String("create-topic", names.TopicOrderCreate, "order-create topic")
	tokenKey := fs.String("token-key", os.Getenv(names.EnvTokenKey), "HS256 key of the bearer tokens, under kid \""+tokens.DefaultKID+"\" ($"+names.EnvTokenKey+")")
	tokenDir := fs.String("token-keys-dir", os.Getenv(names.EnvTokenKeysDir), "directory of token keys: <kid>.hs256 (raw HMAC key), <kid>.es256.pem (EC P-256 public key); several for rotation ($"+names.EnvTokenKeysDir+")")
	issuer := fs.String("token-issuer", envOr(names.EnvTokenIssuer, tokens.DefaultIssuer), "the tokens' required iss ($"+names.EnvTokenIssuer+")")
	audience := fs.String("token-audience", envOr(names.EnvTokenAudience, tokens.DefaultAudience), "the tokens' required aud ($"+names.EnvTokenAudience+")")
	maxLife := fs.Duration("token-max-lifetime", tokens.DefaultMaxLifetime, "longest exp − iat accepted")
	leeway := fs.Duration("token-leeway", tokens.DefaultLeeway, "clock skew allowed on exp, nbf and iat")
	insecure := fs.Bool("insecure-dev-users", false, "trust the X-User-ID header (development only)")
	deadline := fs.Duration("business-deadline", 5*time.Minute, "business deadline of a reservation")
	rate := fs.Int("rate", 0, "requests per second this gateway admits (0: unlimited)")
	userLimit := fs.Int("user-limit", 0, "reservation requests one user may send per -user-window, shared by every replica through Redis (0: none)")
	userWindow := fs.Duration("user-window", 10*time.Second, "the window of -user-limit")
	statusRate := fs.Int("status-rate", 0, "status requests per second this gateway admits (0: unlimited)")
	sendWorkers := fs.Int("send-workers", 32, "workers sending order-create messages after the answer (0: send in the request, before answering)")
	sendQueue := fs.Int("send-queue", 0, "reservations waiting for a send worker before requests send themselves (0: 64 × -send-workers)")
	reserveLanes := fs.Int("reserve-lanes", 4, "concurrent pipelines carrying reservations to Redis: requests arriving together share a round trip (0: one round trip per request)")
	resendAfter := fs.Duration("resend-after", DefaultResendAfter, "a sent reservation PostgreSQL has not decided after this long is sent again by the scanner, same id (doubling with each send; 0: never; keep it the scanner's)")
	drainDelay := fs.Duration("drain-delay", 0, "on SIGTERM, keep serving this long with /readyz failing before the listener closes, so that the Service stops routing here first (pods: 5s)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	var errs []error
	if err := c.Check(config.Need{PG: true, Redis: true, RMQ: true, Slots: true, Keys: true}); err != nil {
		errs = append(errs, err)
	}
	verifier := tokens.NewVerifier()
	verifier.Issuer, verifier.Audience, verifier.MaxLifetime, verifier.Leeway = *issuer, *audience, *maxLife, *leeway
	if *tokenKey != "" {
		if err := verifier.AddHMAC(tokens.DefaultKID, []byte(*tokenKey)); err != nil {
			errs = append(errs, errors.New("-token-key must be at least 32 bytes"))
		}
	}
	if *tokenDir != "" {
		if err := verifier.LoadDir(*tokenDir); err != nil {
			errs = append(errs, fmt.Errorf("-token-keys-dir: %w", err))
		}
	}
	if verifier.Keys() == 0 && !*insecure {
		errs = append(errs, errors.New("no token key: -token-key (at least 32 bytes) or -token-keys-dir"))
	}
	if *issuer == "" || *audience == "" || *maxLife <= 0 || *leeway < 0 || *leeway > 5*time.Minute {
		errs = append(errs, errors.New("-token-issuer and -token-audience must be set, -token-max-lifetime positive, -token-leeway within [0, 5m]"))
	}
	if *deadline <= 0 || *rate < 0 || *drainDelay < 0 || *drainDelay > 20*time.Second {
		errs = append(errs, errors.New("-business-deadline must be positive, -rate non-negative, -drain-delay within [0, 20s]"))
	}
	if *resendAfter < 0 || (*resendAfter > 0 && *resendAfter < 5*time.Second) {
		errs = append(errs, errors.New("-resend-after must be 0 or at least 5s"))
	}
	if *sendWorkers < 0 || *sendWorkers > 1024 || *sendQueue < 0 || *sendQueue > 1<<20 {
		errs = append(errs, errors.New("-send-workers must be within [0, 1024], -send-queue within [0, 1048576]"))
	}
	if *userLimit < 0 || *userLimit > 100000 || *userWindow < 100*time.Millisecond || *userWindow > time.Hour || *statusRate < 0 {
		errs = append(errs, errors.New("-user-limit must be within [0, 100000], -user-window within [100ms, 1h], -status-rate non-negative"))
	}
	if *reserveLanes < 0 || *reserveLanes > 256 {
		errs = append(errs, errors.New("-reserve-lanes must be within [0, 256]"))
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	list, _ := c.SKUBuckets() // checked above (Need.Slots)
	skus := map[int64]int{}
	for _, sku := range list {
		skus[sku.ID] = sku.Buckets
	}
	ring, _ := c.Keyring()
	log := c.Logger("gateway")
	flushTraces, err := c.Tracing(ctx, "gateway")
	if err != nil {
		return err
	}
	defer flushTraces()
	var closers []func() error
	defer closeAll(&closers)
	pool, err := openPG(ctx, &c, &closers)
	if err != nil {
		return err
	}
	rdb, err := openRedis(ctx, &c, &closers)
	if err != nil {
		return err
	}
	prod, err := openProducer(&c, &closers, *topic)
	if err != nil {
		return err
	}
	g := gateway.New(gateway.Config{ActivityID: c.ActivityID, SKUs: skus, Topic: *topic, Tokens: verifier,
		InsecureDevUsers: *insecure, BusinessDeadline: *deadline, SendGrace: 5 * time.Second, RequestTTL: 30 * time.Minute,
		SendAttempts: 2, SendTimeout: time.Second, ResendAfter: *resendAfter, SendWorkers: *sendWorkers, SendQueue: *sendQueue, ReserveLanes: *reserveLanes, UserLimit: *userLimit, UserWindow: *userWindow, StatusPerSecond: *statusRate, RatePerSecond: *rate, Failpoint: failpoint,
		BrokerReachable: func(ctx context.Context) error { return mq.Reachable(ctx, c.RMQEndpoint) }}, redisstore.New(rdb), pool, prod, ring, log)
	go g.SettleMoves(ctx, 5*time.Second)
	go func() {
		if err := metrics.Serve(ctx, *metricsAddr, g.MetricsHandler()); err != nil {
			log.Error("metrics listener", "error", err)
		}
	}()
	srv := metrics.NewServer(*addr, g.Handler())
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("listening", "addr", *addr)
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
		g.Drain()
		if *drainDelay > 0 {
			log.Info("draining: readiness fails, still serving", "for", drainDelay.String())
			time.Sleep(*drainDelay)
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		g.Close() // the queued sends go out before the broker client closes
		return err
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
