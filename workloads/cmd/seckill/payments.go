package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"golang.org/x/time/rate"

	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/payment"
)

// runPayments serves the payment providers' signed callbacks and looks up
// the orders of quarantined callbacks again.
func runPayments(ctx context.Context, args []string) error {
	var c config.Common
	fs := flag.NewFlagSet("payments", flag.ContinueOnError)
	c.Bind(fs)
	addr := fs.String("addr", envOr(names.EnvHTTPAddr, fmt.Sprintf(":%d", names.DefaultPorts["payments"])), "listen address ($"+names.EnvHTTPAddr+")")
	keysFlag := fs.String("payment-keys", os.Getenv(names.EnvPaymentKeys), "provider:hexkey,... HMAC keys of the callbacks ($"+names.EnvPaymentKeys+")")
	eventsTopic := fs.String("events-topic", names.TopicOrderEvents, "order events topic (ORDER_PAID)")
	metricsAddr := fs.String("metrics-addr", envOr(names.EnvMetricsAddr, fmt.Sprintf(":%d", names.DefaultPorts["payments-metrics"])),
		"listen address of /metrics, /healthz, /readyz, apart from the callbacks (\"0\": off) ($"+names.EnvMetricsAddr+")")
	perSecond := fs.Int("rate", 0, "callbacks per second this process admits; beyond, 429 and the provider sends again (0: unlimited)")
	relook := fs.Duration("relookup", 30*time.Second, "how often quarantined callbacks of unknown orders are looked up again")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	var errs []error
	if err := c.Check(config.Need{PG: true}); err != nil {
		errs = append(errs, err)
	}
	keys, err := payment.ParseKeys(*keysFlag)
	if err != nil {
		errs = append(errs, err)
	}
	if *relook < time.Second || *perSecond < 0 {
		errs = append(errs, errors.New("-relookup must be at least 1s, -rate non-negative"))
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	log := c.Logger("payments")
	flushTraces, err := c.Tracing(ctx, "payments")
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
	store := &payment.Store{Pool: pool, EventsTopic: *eventsTopic, Failpoint: failpoint}
	health := &metrics.Health{}
	mux := http.NewServeMux()
	h := &payment.Handler{Store: store, Keys: keys, Log: log}
	if *perSecond > 0 {
		h.Limiter = rate.NewLimiter(rate.Limit(*perSecond), *perSecond)
	}
	h.Routes(mux)
	status := metrics.Handler(metrics.Registry(), health)
	mux.Handle("GET /healthz", status)
	mux.Handle("GET /readyz", status)
	go func() {
		if err := metrics.Serve(ctx, *metricsAddr, status); err != nil {
			log.Error("metrics listener", "error", err)
		}
	}()
	go func() {
		t := time.NewTicker(*relook)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if n, err := store.RetryQuarantined(ctx, 100); err != nil {
					log.Warn("looking up quarantined callbacks", "error", err)
				} else if n > 0 {
					log.Info("quarantined callbacks applied", "count", n)
				}
			}
		}
	}()
	health.Ready()
	log.Info("listening", "addr", *addr)
	return metrics.Serve(ctx, *addr, mux)
}
