package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/seckill/seckill-operator/workloads/metrics"
)

// envPprofAddr, when set, serves Go's profiles (/debug/pprof/) on that
// address, loopback only: for make bench-sale and for an operator's
// kubectl port-forward, never on a Service.
const envPprofAddr = "SECKILL_PPROF_ADDR"

func startPprof() error {
	addr := os.Getenv(envPprofAddr)
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("$%s: %w", envPprofAddr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("$" + envPprofAddr + " must be a loopback address (127.0.0.1:port)")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("$%s: %w", envPprofAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := metrics.NewServer("", mux)
	srv.WriteTimeout = 0 // a CPU profile answers after its ?seconds=; loopback only
	go func() { _ = srv.Serve(ln) }()
	return nil
}
