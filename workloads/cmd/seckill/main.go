// Command seckill is the workloads binary: one image, one subcommand per
// workload. The operator runs "seckill migrate" before the workloads start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/migrations"
	"github.com/seckill/seckill-operator/workloads/names"
)

const usage = `usage: seckill <command> [flags]

commands:
  migrate      apply the embedded PostgreSQL migrations (DSN from $` + names.EnvPGDSN + ` or -dsn)
  activity     provision | window | status: the operator's store operations, by hand
  gateway      HTTP API: reserve, send at once, answer QUEUED
  consumer     order consumer: order-create messages -> one PostgreSQL transaction each
  relay        outbox relay: event_outbox -> RocketMQ
  projector    order events -> Redis projection
  compensator  rejected reservations -> Redis stock, once
  scanner      send-scanner: resend reservations not known to be sent
  canceller    timeout cancel: expired unpaid orders -> CANCELLED once, after the channel closes the payment
  dlq-replay   send a group's dead-lettered messages back to its topic (same message ids)
  payments     payment providers' signed callbacks -> PAID once; unknown orders quarantined
  provider-sim the simulated payment channel (merchant API + signed callbacks), for running without a real one
  reconcile    the reconcile job: per-reservation checks, automatic repairs, conservation; exit 1 on critical anomalies left
  runbook      manual repair runbook: freeze, evidence, list/show/resolve repair tasks, unfreeze, verify

Run "seckill <command> -h" for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := startPprof(); err != nil {
		fmt.Fprintf(os.Stderr, "seckill: %v\n", err)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "migrate":
		err = runMigrate(ctx, os.Args[2:])
	case "activity":
		err = runActivity(ctx, os.Args[2:])
	case "gateway":
		err = runGateway(ctx, os.Args[2:])
	case "consumer", "relay", "projector", "compensator", "scanner", "canceller":
		err = worker(ctx, os.Args[1], os.Args[2:])
	case "payments":
		err = runPayments(ctx, os.Args[2:])
	case "provider-sim":
		err = runProviderSim(ctx, os.Args[2:])
	case "reconcile":
		err = runReconcile(ctx, os.Args[2:])
	case "runbook":
		err = runRunbook(ctx, os.Args[2:])
	case "dlq-replay":
		err = runDLQReplay(ctx, os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "seckill: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "seckill %s: %v\n", os.Args[1], err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	dsn := fs.String("dsn", os.Getenv(names.EnvPGDSN), "PostgreSQL DSN")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *dsn == "" {
		return usageError{fmt.Errorf("no DSN: set $%s or -dsn", names.EnvPGDSN)}
	}
	if *timeout <= 0 {
		return usageError{errors.New("-timeout must be positive")}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return usageError{fmt.Errorf("parsing DSN: %w", err)}
	}
	defer pool.Close()
	v, err := migrations.Up(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Printf(`{"msg":"schema migrated","version":%d}`+"\n", v)
	return nil
}
