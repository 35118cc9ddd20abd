// Command clusterdemo is `make demo`: a flash sale run by the operator on a
// real single-node Kubernetes on this machine (hack/cluster.sh up), as a
// platform team runs one — helm install, a Secret and a SeckillActivity,
// buyers at the gateway Service, kubectl patch while it runs (stock raised,
// paused and resumed, consumers suspended to build a backlog), a consumer
// pod killed, the phases to Completed — then what it saw and every
// invariant, checked in PostgreSQL and Redis.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/seckill/seckill-operator/internal/stackenv"
	"github.com/seckill/seckill-operator/test/clustersale"
)

func main() {
	stock := flag.Int("stock", 400, "units on sale at the start (the run raises it by half)")
	flag.Parse()
	if *stock < 20 || *stock > 100_000 {
		fmt.Fprintln(os.Stderr, "clusterdemo: -stock must be within [20, 100000]")
		os.Exit(2)
	}
	env := func(key string) string {
		v, err := stackenv.Lookup(key)
		if err != nil {
			fmt.Fprintln(os.Stderr, "clusterdemo:", err, "(make demo starts the stack and the cluster)")
			os.Exit(1)
		}
		return v
	}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	res, err := clustersale.Run(ctx, clustersale.Options{Root: root, DSN: env("SECKILL_PG_DSN"), RedisAddr: env("SECKILL_REDIS_ADDR"),
		RMQEndpoint: env("SECKILL_RMQ_ENDPOINT"), RMQNameServer: env("SECKILL_RMQ_NAMESRV"), RocketMQCA: readCA(env("SECKILL_RMQ_CA_FILE")), RedisUsername: env("SECKILL_REDIS_USERNAME"), RedisPassword: env("SECKILL_REDIS_PASSWORD"), RedisCA: readCA(env("SECKILL_REDIS_CA_FILE")),
		RMQAccessKey: env("SECKILL_RMQ_ACCESS_KEY"), RMQSecretKey: env("SECKILL_RMQ_SECRET_KEY"), Stock: *stock,
		Logf: func(format string, args ...any) { fmt.Printf(format+"\n", args...) }})
	if res != nil {
		report(res)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterdemo:", err)
		os.Exit(1)
	}
	if failed := res.Failed(); len(failed) > 0 {
		fmt.Fprintln(os.Stderr, "clusterdemo: invariants failed:", failed)
		os.Exit(1)
	}
}

func report(r *clustersale.Result) {
	fmt.Printf("\nactivity %d in namespace %s, %s\n", r.Activity, r.Namespace, r.Took)
	fmt.Println("\nphases")
	for _, p := range r.Phases {
		fmt.Println("  " + p)
	}
	fmt.Println("\nhealth as GitOps tools read it (kstatus; kubectl wait --for=condition=Ready)")
	for _, h := range r.Health {
		fmt.Println("  " + h)
	}
	fmt.Println("\norder consumers over time (the operator's decisions)")
	fmt.Printf("  %6s  %7s  %5s  %-12s  %s\n", "at", "desired", "ready", "compensation", "why")
	for _, s := range r.Consumers {
		comp := "running"
		if s.CompensationStop {
			comp = "PAUSED"
		}
		fmt.Printf("  %6s  %7d  %5d  %-12s  %s\n", "+"+s.At.String(), s.Desired, s.Ready, comp, s.Reason)
	}
	yes := map[bool]string{true: "yes", false: "NO"}
	fmt.Printf("\n  scaled up from the backlog %s, back down %s; backlog guard set %s, cleared %s; consumer pod killed: %s\n",
		yes[r.ScaledUp], yes[r.ScaledDown], yes[r.GuardSet], yes[r.GuardCleared], r.KilledPod)
	fmt.Printf("\nanswers to %d buyers: %v\n", sum(r.Answers), r.Answers)
	if r.PluginStatus != "" {
		fmt.Println("\nkubectl seckill status, while selling")
		for _, l := range strings.Split(strings.TrimRight(r.PluginStatus, "\n"), "\n") {
			fmt.Println("  " + l)
		}
	}
	fmt.Println("\nchecks: invariants (PostgreSQL and Redis), alerts on a real Prometheus, the dashboard, the plugin")
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Printf("  %s %-66s %s\n", mark, c.Name, c.Got)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// readCA is the stack's CA file, or exits.
func readCA(path string) []byte {
	b, err := os.ReadFile(path) //nolint:gosec // the stack's CA
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return b
}
