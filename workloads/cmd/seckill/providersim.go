package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/metrics"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/states"
)

// runProviderSim serves the simulated payment channel as a process: the
// merchant API the canceller calls (close, query, refund) and the buyer's
// pay, whose success is posted, signed, to the payments workload's callback
// endpoint — late and duplicated when asked to be.
func runProviderSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("provider-sim", flag.ContinueOnError)
	addr := fs.String("addr", envOr(names.EnvHTTPAddr, fmt.Sprintf(":%d", names.DefaultPorts["provider-sim"])), "listen address ($"+names.EnvHTTPAddr+")")
	name := fs.String("name", envOr("SECKILL_PROVIDER_NAME", "sim"), "the channel's name (the payments workload's callback path and key)")
	callbackURL := fs.String("callback-url", envOr("SECKILL_CALLBACK_URL", fmt.Sprintf("http://127.0.0.1:%d", names.DefaultPorts["payments"])), "base URL of the payments workload ($SECKILL_CALLBACK_URL)")
	keysFlag := fs.String("payment-keys", os.Getenv(names.EnvPaymentKeys), "provider:hexkey,... the callback signing keys; the first entry of -name signs ($"+names.EnvPaymentKeys+")")
	delay := fs.Duration("callback-delay", 0, "delay of each success callback")
	dups := fs.Int("duplicates", 0, "extra copies of each success callback")
	afterClose := fs.Bool("success-after-close", false, "succeed a payment even after its close (the channel's own race)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	var errs []error
	keys, err := payment.ParseKeys(*keysFlag)
	if err != nil {
		errs = append(errs, err)
	} else if keys[*name] == nil {
		errs = append(errs, fmt.Errorf("-payment-keys has no key for channel %q", *name))
	}
	if u, err := url.Parse(*callbackURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("-callback-url %q: want http(s)://host:port", *callbackURL))
	}
	if *delay < 0 || *dups < 0 || *dups > 10 {
		errs = append(errs, errors.New("-callback-delay must not be negative and 0 <= -duplicates <= 10"))
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	log := logs.New(os.Stderr, "provider-sim", logs.Options{})
	sim := &provider.Sim{ProviderName: *name, CallbackDelay: *delay, Duplicates: *dups, SuccessAfterClose: *afterClose,
		Deliver: postCallback(strings.TrimRight(*callbackURL, "/")+"/v1/payments/"+*name+"/callbacks", keys[*name][0])}
	mux := http.NewServeMux()
	mux.Handle("/orders/", provider.Handler(sim))
	mux.Handle("/refunds/", provider.Handler(sim))
	health := &metrics.Health{}
	status := metrics.Handler(metrics.Registry(), health)
	mux.Handle("GET /healthz", status)
	mux.Handle("GET /readyz", status)
	health.Ready()
	log.Info("listening", "addr", *addr, "callbacks", *callbackURL)
	return metrics.Serve(ctx, *addr, mux)
}

// postCallback delivers a success the way a channel does: the signed JSON
// body to the merchant's callback endpoint; anything but 2xx is an error.
func postCallback(endpoint string, key []byte) func(context.Context, uuid.UUID, provider.Paid) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	return func(ctx context.Context, order uuid.UUID, p provider.Paid) error {
		body, err := json.Marshal(payment.CallbackBody{TransactionID: p.TransactionID, OrderID: order.String(),
			AmountCents: p.AmountCents, Currency: p.Currency, Status: states.PaymentSuccess, PaidAtMs: p.At.UnixMilli()})
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		payment.SignedHeaders(req.Header, key, time.Now(), body)
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("posting the callback of order %s: %w", order, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("posting the callback of order %s: HTTP %d", order, resp.StatusCode)
		}
		return nil
	}
}
