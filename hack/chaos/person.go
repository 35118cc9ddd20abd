package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/seckill/seckill-operator/hack/salekit"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/reconcile"
	"github.com/seckill/seckill-operator/workloads/repair"
)

// settleByRunbook is the settling of a sale whose Redis failed over: a
// failover can lose writes the primary acknowledged (design.md#faults row 13), and
// the design repairs that by an activity-level recount a person approves,
// never by a blind INCR (design.md#runbook). So, until the sale is settled and every
// invariant holds (or within runs out), it does what the runbook asks of the
// on-call person for the tasks the reconcile job (running every 20 s) gave
// it: `seckill runbook resolve -step recount` for a SKU whose Redis
// counters PostgreSQL contradicts, then `-step close-by-recount` for a
// rejected reservation whose Redis key was lost. Any other task for a person
// stays open and fails the check. steps counts the resolutions.
func (s *sale) settleByRunbook(ctx context.Context, within time.Duration) (invariants.Report, int, error) {
	src := invariants.Sources{Pool: s.pool, Redis: s.rs}
	skus := []invariants.SKU{{ID: sku, Buckets: buckets}}
	deadline := time.Now().Add(within)
	steps := 0
	for {
		rep, err := invariants.Run(ctx, src, s.activity, skus, invariants.Expect{Settled: true})
		if err != nil || rep.OK() || time.Now().After(deadline) {
			return rep, steps, err
		}
		tasks, err := s.manualTasks()
		if err != nil {
			return rep, steps, err
		}
		for _, rule := range []struct{ rule, step string }{{repair.RuleRecount, repair.StepRecount}, {reconcile.RuleRedisReservationMissing, repair.StepCloseByRecount}} {
			for _, t := range tasks {
				if t.Rule != rule.rule {
					continue
				}
				out, err := salekit.Cmd(s.bin, s.common, "runbook", "resolve", "-repair-id", t.IDHex, "-step", rule.step,
					"-operator", "chaos-oncall", "-approver", "chaos-lead", "-reason", "Redis failover lost acknowledged writes (chaos redis-failover)").CombinedOutput()
				fmt.Fprintf(s.log, "chaos: runbook resolve %s -step %s: %s\n", t.IDHex, rule.step, out)
				if err != nil {
					// Refused (a close before its recount, say): tried again
					// on the next round.
					continue
				}
				steps++
			}
		}
		time.Sleep(5 * time.Second)
	}
}

// manualTasks are the activity's repair tasks waiting for a person.
func (s *sale) manualTasks() ([]repair.Task, error) {
	out, err := salekit.Cmd(s.bin, s.common, "runbook", "list", "-status", repair.Manual, "-json").Output()
	if err != nil {
		return nil, fmt.Errorf("seckill runbook list: %w", err)
	}
	var ts []repair.Task
	if err := json.Unmarshal(out, &ts); err != nil {
		return nil, fmt.Errorf("seckill runbook list -json: %w", err)
	}
	return ts, nil
}
