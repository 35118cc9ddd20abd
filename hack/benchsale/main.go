// Command benchsale is `make bench-sale`: the flash sale of issue 14 on the
// local stack, at a fixed arrival rate. The workloads run as processes
// (gateway, order consumers, outbox relay, projector, compensator,
// send-scanner); one SKU of -stock units in -buckets Redis buckets is hit by
// -requests reservations, each from a new user, offered open loop at -rate
// per second (vegeta's attacker: arrivals do not slow down when the server
// does). It records HDR histograms of the reserve latency (HTTP) and of
// reservation → order (the order's created_at − the reservation's
// reserved_at, from PostgreSQL), the backlog (reservations queued but not yet
// orders) over time, checks every invariant, and measures the ceilings in the
// same run: redis-benchmark EVALSHA of the reserve script and pgbench of the
// one-order transaction. It prints a table (each run and the median) and
// writes a PNG plot of the last run (rate, latency percentiles, backlog).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	rate        int
	concurrency int // clients of the closed loop at -rate 0
	gatewayArgs string
	gatewayEnv  string
	fault       string        // "", broker-restart, pg-freeze, kill-consumer
	faultFor    time.Duration // how long the fault lasts
	requests    int
	stock       int64
	buckets     int
	consumers   int
	runs        int
	out         string
	ceilings    bool
	profile     bool
	bin         string
	// ordersAfterLoad starts the order consumers when the load ends: the
	// gateway measured beside Redis and the broker only, as on nodes of
	// its own, not sharing the two cores with PostgreSQL and the consumers.
	ordersAfterLoad bool
	timeout         time.Duration
	// retries is how many times a buyer told 503 sends the same request
	// (same request id and token) again, after a backoff of 0.5 s doubling
	// to 5 s: what the API asks of a client (0: each buyer sends once).
	retries  int
	evalshaN int // redis-benchmark calls per ceiling
	pgbenchN int // pgbench transactions per ceiling
}

func main() {
	var c config
	flag.IntVar(&c.rate, "rate", 1000, "reservations offered per second (open loop); 0: as fast as -concurrency clients are answered (the gateway's saturation)")
	flag.IntVar(&c.concurrency, "concurrency", 64, "clients of the closed loop at -rate 0")
	flag.StringVar(&c.fault, "fault", "", "a fault a third into the load: broker-restart (broker+proxy stopped, started again), pg-freeze (every PostgreSQL process SIGSTOPped, then SIGCONTed), kill-consumer (an order consumer kill -9ed, started again)")
	flag.DurationVar(&c.faultFor, "fault-for", 10*time.Second, "how long the fault lasts")
	flag.StringVar(&c.gatewayEnv, "gateway-env", "", "more environment for the gateway, space-separated KEY=VALUE (e.g. \"GOGC=400\", to compare)")
	flag.StringVar(&c.gatewayArgs, "gateway-args", "", "more flags for the gateway, space-separated (e.g. \"-reserve-lanes 0\", to compare)")
	flag.IntVar(&c.requests, "requests", 100000, "reservations offered in all, each by a new user")
	flag.Int64Var(&c.stock, "stock", 10000, "units of the one SKU")
	flag.IntVar(&c.buckets, "buckets", 4, "Redis stock buckets of the SKU")
	flag.IntVar(&c.consumers, "consumers", 2, "order consumer processes")
	flag.IntVar(&c.runs, "runs", 3, "sales to run; the table shows each and the median")
	flag.StringVar(&c.out, "out", filepath.Join(".stack", "bench-sale"), "directory for the table and the plot")
	flag.BoolVar(&c.ceilings, "ceilings", true, "measure redis-benchmark's and pgbench's ceilings before each sale")
	flag.StringVar(&c.bin, "bin", "", "a workloads binary to run (default: built from this checkout; another commit's, to compare)")
	flag.BoolVar(&c.ordersAfterLoad, "orders-after-load", false, "start the order consumers when the load ends (the gateway's own throughput, without PostgreSQL and the consumers on the same cores); reservation → order then includes the wait")
	flag.BoolVar(&c.profile, "profile", true, "take a CPU profile of the gateway during each sale (gateway-cpu-N.pprof, its top in gateway-cpu-N.txt)")
	flag.IntVar(&c.evalshaN, "evalsha-n", 100000, "redis-benchmark calls for the reserve ceiling")
	flag.IntVar(&c.pgbenchN, "pgbench-n", 5000, "pgbench transactions for the order ceiling")
	flag.IntVar(&c.retries, "retries", 0, "times a buyer told 503 sends the same request again (same request id), after 0.5 s doubling to 5 s; 0: each buyer sends once")
	flag.DurationVar(&c.timeout, "settle-timeout", 3*time.Minute, "how long the orders may take after the load ends")
	flag.Parse()
	if err := c.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sale:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sale:", err)
		os.Exit(1)
	}
}

func (c config) validate() error {
	switch {
	case c.rate < 0 || c.requests <= 0 || c.stock <= 0:
		return errors.New("-rate must not be negative, -requests and -stock must be positive")
	case c.rate == 0 && (c.concurrency < 1 || c.concurrency > 4096):
		return errors.New("-concurrency must be 1 … 4096")
	case c.buckets < 1 || c.buckets > 64:
		return errors.New("-buckets must be 1 … 64")
	case c.consumers < 1 || c.consumers > 16:
		return errors.New("-consumers must be 1 … 16")
	case c.fault != "" && c.fault != "broker-restart" && c.fault != "pg-freeze" && c.fault != "kill-consumer":
		return errors.New("-fault: want broker-restart, pg-freeze or kill-consumer")
	case c.fault != "" && (c.rate == 0 || c.faultFor < time.Second || c.faultFor > 5*time.Minute):
		return errors.New("-fault needs an open loop (-rate > 0) and -fault-for within [1s, 5m]")
	case c.ordersAfterLoad && c.fault == "kill-consumer":
		return errors.New("-orders-after-load: no consumer runs during the load to kill")
	case c.retries < 0 || c.retries > 1000 || (c.retries > 0 && c.rate == 0):
		return errors.New("-retries must be 0 … 1000, and needs an open loop (-rate > 0)")
	case c.runs < 1 || c.evalshaN < 1 || c.pgbenchN < 1:
		return errors.New("-runs, -evalsha-n and -pgbench-n must be positive")
	}
	return nil
}

func run(ctx context.Context, c config) error {
	if err := os.MkdirAll(c.out, 0o750); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "seckill-bench-sale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := c.bin
	if bin == "" {
		fmt.Fprintln(os.Stderr, "building the workloads binary …")
		if bin, err = buildBinary(dir); err != nil {
			return err
		}
	}
	var results []*saleResult
	for i := range c.runs {
		var ceil ceilings
		if c.ceilings {
			fmt.Fprintf(os.Stderr, "run %d/%d: ceilings (redis-benchmark, pgbench) …\n", i+1, c.runs)
			if ceil, err = measureCeilings(c); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "run %d/%d: %d reservations at %d/s …\n", i+1, c.runs, c.requests, c.rate)
		prof := filepath.Join(c.out, fmt.Sprintf("gateway-cpu-%d.pprof", i+1))
		r, err := sale(ctx, c, bin, filepath.Join(c.out, fmt.Sprintf("workloads-%d.log", i+1)), prof)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		if c.profile {
			top := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", bin, prof) //nolint:gosec // our files
			out, err := top.Output()
			if err != nil {
				return fmt.Errorf("go tool pprof: %w", err)
			}
			if err := os.WriteFile(strings.TrimSuffix(prof, ".pprof")+".txt", out, 0o644); err != nil { //nolint:gosec // a report
				return err
			}
		}
		r.ceilings = ceil
		results = append(results, r)
	}
	table := renderTable(c, results)
	fmt.Print(table)
	if err := os.WriteFile(filepath.Join(c.out, "table.txt"), []byte(table), 0o644); err != nil { //nolint:gosec // a report
		return err
	}
	png := filepath.Join(c.out, "sale.png")
	if err := plotSale(results[len(results)-1], png); err != nil {
		return err
	}
	fmt.Printf("plot of the last run: %s\n", png)
	for i, r := range results {
		if len(r.failed) > 0 {
			return fmt.Errorf("run %d: invariants failed: %v", i+1, r.failed)
		}
	}
	return nil
}

type ceilings struct {
	evalsha, pgbench float64
	evalshaCPU       time.Duration // Redis's CPU per EVALSHA under redis-benchmark
}

var (
	ceilingLine  = regexp.MustCompile(`ceiling .*: ([0-9.]+) (calls|tx)/s`)
	redisCPULine = regexp.MustCompile(`([0-9.]+) µs of Redis CPU per call`)
)

// measureCeilings runs the two ceiling halves of make bench's scripts, once.
func measureCeilings(cfg config) (ceilings, error) {
	var c ceilings
	for _, s := range []struct {
		script, n string
		into      *float64
	}{{"bench-reserve.sh", strconv.Itoa(cfg.evalshaN), &c.evalsha}, {"bench-order.sh", strconv.Itoa(cfg.pgbenchN), &c.pgbench}} {
		cmd := exec.Command(filepath.Join("hack", s.script)) //nolint:gosec // our own script
		cmd.Env = append(os.Environ(), "RUNS=1", "N="+s.n, "CEILING_ONLY=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return c, fmt.Errorf("%s: %w\n%s", s.script, err, out)
		}
		m := ceilingLine.FindSubmatch(out)
		if m == nil {
			return c, fmt.Errorf("%s printed no ceiling:\n%s", s.script, out)
		}
		*s.into, _ = strconv.ParseFloat(string(m[1]), 64)
		if s.script == "bench-reserve.sh" {
			m := redisCPULine.FindSubmatch(out)
			if m == nil {
				return c, fmt.Errorf("%s printed no Redis CPU per call:\n%s", s.script, out)
			}
			us, _ := strconv.ParseFloat(string(m[1]), 64)
			c.evalshaCPU = time.Duration(us * float64(time.Microsecond))
		}
	}
	return c, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
