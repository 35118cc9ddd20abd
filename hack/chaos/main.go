// Command chaos is make chaos: the fault matrix at volume (design.md#faults, design.md#failpoints). Each scenario runs a sale of its own on the local stack — every
// workload as a process of the failpoints build (gateway, two order
// consumers, relay, projector, compensator, send scanner, canceller,
// payments, the simulated payment channel), buyers at a steady rate that
// makes the consumers receive batches, some of them paying — and injects
// its fault again and again: a process exiting at a failpoint and started
// again, a COMMIT's answer lost on the wire, PostgreSQL frozen or
// restarted, Redis frozen, the broker restarted, random SIGKILLs. Then the
// traffic stops, the sale settles and the one invariant checker (package
// invariants) judges it. It prints a table and exits non-zero on any
// violation.
//
//	go run ./hack/chaos -cycles 200            # every scenario, 200 faults each
//	go run ./hack/chaos -cycles 5 -only after_inbox_insert,pg-freeze
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type config struct {
	cycles int
	rate   float64
	after  time.Duration
	only   map[string]bool
	settle time.Duration
}

func main() {
	var c config
	var only string
	flag.IntVar(&c.cycles, "cycles", 20, "faults per scenario (kill-and-restart cycles for a failpoint)")
	flag.Float64Var(&c.rate, "rate", 60, "buyers per second during each scenario (each a new user)")
	flag.DurationVar(&c.after, "after", 15*time.Second, "traffic kept on after a scenario's last fault (its recovery is measured in it)")
	flag.DurationVar(&c.settle, "settle", 3*time.Minute, "how long a sale may take to settle after the traffic stops")
	flag.StringVar(&only, "only", "", "comma-separated scenario names (default: all)")
	flag.Parse()
	if c.cycles < 1 || c.rate <= 0 || c.rate > 1000 || c.after < 0 || c.settle < 10*time.Second {
		fmt.Fprintln(os.Stderr, "chaos: want -cycles >= 1, 0 < -rate <= 1000, -after >= 0, -settle >= 10s")
		os.Exit(2)
	}
	names := map[string]bool{}
	for _, s := range scenarios {
		names[s.name] = true
	}
	if only != "" {
		c.only = map[string]bool{}
		for _, n := range strings.Split(only, ",") {
			n = strings.TrimSpace(n)
			if !names[n] {
				fmt.Fprintf(os.Stderr, "chaos: no scenario %q\n", n)
				os.Exit(2)
			}
			c.only[n] = true
		}
	}
	// Interrupted: no workload outlives the harness.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "chaos: interrupted; killing the workloads")
		killLive()
		os.Exit(130)
	}()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	dir := filepath.Join(".stack", "chaos")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	fmt.Println("building the workloads binary with failpoints …")
	bin, err := filepath.Abs(filepath.Join(dir, "seckill-failpoints"))
	if err != nil {
		return err
	}
	build := exec.Command("go", "build", "-tags", "failpoints", "-o", bin, "./workloads/cmd/seckill") //nolint:gosec // our own build into our directory
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	started := time.Now()
	var rows []row
	failed := 0
	for _, s := range scenarios {
		if c.only != nil && !c.only[s.name] {
			continue
		}
		fmt.Printf("\n== %s: %s\n", s.name, s.what)
		t0 := time.Now()
		r, err := runScenario(context.Background(), c, bin, dir, s)
		r.took = time.Since(t0)
		if err != nil {
			r.err = err
		}
		if r.err != nil || r.violations > 0 {
			failed++
		}
		rows = append(rows, r)
		fmt.Println(r.line())
	}
	fmt.Printf("\nmake chaos: %d scenarios in %s (logs in %s)\n\n", len(rows), time.Since(started).Round(time.Second), dir)
	fmt.Print(table(rows))
	ran := make([]string, len(rows))
	for i, r := range rows {
		ran[i] = r.name
	}
	counts, where, err := eventsSeen(dir, ran)
	if err != nil {
		return err
	}
	report, missing := eventReport(counts, where)
	fmt.Print("\n" + report)
	if failed > 0 {
		return fmt.Errorf("%d of %d scenarios failed", failed, len(rows))
	}
	if c.only == nil && len(missing) > 0 {
		return fmt.Errorf("a full run logged no %s", strings.Join(missing, ", "))
	}
	return nil
}
