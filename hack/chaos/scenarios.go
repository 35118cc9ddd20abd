package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seckill/seckill-operator/internal/testenv/pgproxy"
	"github.com/seckill/seckill-operator/workloads/gateway"
	"github.com/seckill/seckill-operator/workloads/invariants"
)

// scenario is one row of the matrix.
type scenario struct {
	name, what string
	// workload and odds: a failpoint scenario (name is the failpoint); the
	// process crashes at one hit in odds and is started again.
	workload string
	odds     int
	// commitLoss: COMMIT answers lost (and COMMITs cut) by a proxy in front
	// of PostgreSQL, under the first order consumer.
	commitLoss bool
	// fault: hack/stack.sh fault <fault> <faultFor>, cycles/per times.
	fault    string
	faultFor int
	per      int
	// randomKills: SIGKILL of a random workload at random times.
	randomKills bool
	// lowStock: PostgreSQL holds few units (Redis many), so most
	// reservations are rejected and compensated.
	lowStock bool
	// backlog: the order consumers frozen (SIGSTOP) faultFor seconds, so
	// that a real backlog builds in the broker while buyers go on; the
	// operator's backlog guard (seckill activity guard) must pause
	// time-driven compensation during it and resume after.
	backlog bool
	// sentinel: every workload finds the Redis primary through Sentinel,
	// and the sale settles through the runbook's steps for a person.
	sentinel bool
}

var scenarios = []scenario{
	// The gateway's failpoints are hit by every request: at one in 100 it
	// serves about 1.5 s between crashes (one in 5 left it down nearly all
	// the time, and buyers gave up after a minute of retries).
	{name: "after_redis_reserve", what: "gateway exits after the reserve script, before the send", workload: "gateway", odds: 100},
	{name: "after_mq_send_before_redis_mark", what: "gateway exits after the broker's ack, before marking the reservation sent", workload: "gateway", odds: 100},
	{name: "after_inbox_insert", what: "order consumer exits after the inbox insert", workload: "consumer", odds: 3},
	{name: "after_order_insert", what: "order consumer exits after the order insert, before the stock", workload: "consumer", odds: 3},
	{name: "after_pg_stock_decrement", what: "order consumer exits after the stock decrement, before COMMIT", workload: "consumer", odds: 3},
	{name: "during_commit_response", what: "COMMIT answers lost and COMMITs cut on the wire (pgproxy), verified", commitLoss: true},
	{name: "after_pg_commit_before_ack", what: "order consumer exits after COMMIT, before the ack", workload: "consumer", odds: 3},
	{name: "after_compensation_lua", what: "compensator exits after the Redis restore, before the task update", workload: "compensator", odds: 2, lowStock: true},
	{name: "after_payment_record_insert", what: "payments exits inside the payment transaction", workload: "payments", odds: 2},
	{name: "after_cancel_pending", what: "canceller exits after CANCEL_PENDING, before asking the channel", workload: "canceller", odds: 2},
	{name: "after_outbox_send_before_mark", what: "relay exits after sending, before marking SENT", workload: "relay", odds: 3},
	{name: "random-kill", what: "SIGKILL of a random workload at a random time", randomKills: true, lowStock: true},
	{name: "pg-freeze", what: "every PostgreSQL process SIGSTOPped 3 s", fault: "pg-freeze", faultFor: 3, per: 10},
	{name: "pg-restart-fast", what: "pg_ctl restart -m fast (every connection cut), down 2 s", fault: "pg-restart-fast", faultFor: 2, per: 10},
	{name: "pg-restart-immediate", what: "pg_ctl restart -m immediate (crash recovery), down 2 s", fault: "pg-restart-immediate", faultFor: 2, per: 10},
	{name: "redis-freeze", what: "Redis primary SIGSTOPped 3 s under the gateway, projector, compensator", fault: "redis-freeze", faultFor: 3, per: 10, lowStock: true},
	{name: "redis-failover", what: "Redis primary SIGKILLed: Sentinel promotes the replica (acknowledged writes may be lost; a person recounts)", fault: "redis-failover", faultFor: 2, per: 10, sentinel: true},
	{name: "backlog", what: "both order consumers frozen 15 s: a real backlog; the backlog guard pauses compensation, then resumes", backlog: true, faultFor: 15, per: 20},
	{name: "broker-restart", what: "broker + proxy stopped 5 s and started (the entry breaker opens, then closes)", fault: "broker-restart", faultFor: 5, per: 20},
}

// row is one scenario's result.
type row struct {
	name                        string
	cycles, faults              int64
	queued, orders, compensated int64
	violations                  int
	failed                      []string
	backToQueued, toOrderP99    time.Duration
	// tailP99 is reservation → order p99 of the last 10 s of traffic
	// (the recovery at its end); unavailable the 5xx answers buyers retried.
	tailP99     time.Duration
	unavailable int64
	// repairs are the reconcile job's repair tasks (any status);
	// runbookSteps those a person resolved (a recount after a failover).
	repairs      int64
	runbookSteps int
	// guardPauses: the backlog guard's pauses seen (backlog).
	guardPauses int64
	// toCurrent is the longest time, over a real fault's injections, from
	// its end until the orders made were again for reservations under 3 s
	// old; slowRecoveries the injections that took over a minute.
	toCurrent      time.Duration
	slowRecoveries int
	// txns are the order transactions that committed the sale's messages
	// (inbox rows sharing a transaction id), batchMax the largest: the
	// evidence that the consumers took the batch paths.
	txns, messages, batchMax int64
	took                     time.Duration
	gaveUp                   int64
	err                      error
}

// perTxn is the mean messages per order transaction.
func (r row) perTxn() float64 {
	if r.txns == 0 {
		return 0
	}
	return float64(r.messages) / float64(r.txns)
}

func (r row) line() string {
	if r.err != nil {
		return fmt.Sprintf("  %s: ERROR %v", r.name, r.err)
	}
	s := fmt.Sprintf("  %s: %d cycles, %d faults, %d QUEUED, %d orders, %d compensated, %d violations, %d reconcile repairs (%d resolved by a person), %d order transactions (%.1f messages each, at most %d), %d answers 5xx, back to QUEUED %s, reservation → order p99 in the minute after %s, in the last 10 s %s (%s)",
		r.name, r.cycles, r.faults, r.queued, r.orders, r.compensated, r.violations, r.repairs, r.runbookSteps, r.txns, r.perTxn(), r.batchMax, r.unavailable, r.backToQueued.Round(time.Millisecond),
		r.toOrderP99.Round(time.Millisecond), r.tailP99.Round(time.Millisecond), r.took.Round(time.Second))
	if r.toCurrent > 0 || r.slowRecoveries > 0 {
		s += fmt.Sprintf(", orders current (reservation → order < 3 s) again within %s of a fault at worst, %d faults not within a minute",
			r.toCurrent.Round(100*time.Millisecond), r.slowRecoveries)
	}
	if r.guardPauses > 0 {
		s += fmt.Sprintf(", the backlog guard paused %d times and resumed", r.guardPauses)
	}
	for _, f := range r.failed {
		s += "\n    VIOLATION " + f
	}
	return s
}

func table(rows []row) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tcycles\tfaults\treservations\torders\tcompensations\tviolations\trepairs (person)\tmsgs/txn (max)\t5xx answers\tback to QUEUED\torders < 3 s again (>1 min)\tres→order p99 minute after\tp99 last 10 s\ttook\t")
	for _, r := range rows {
		v := fmt.Sprint(r.violations)
		if r.err != nil {
			v = "ERROR"
		}
		current := "-"
		if r.toCurrent > 0 || r.slowRecoveries > 0 {
			current = fmt.Sprintf("%s (%d)", r.toCurrent.Round(100*time.Millisecond), r.slowRecoveries)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d (%d)\t%.1f (%d)\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.name, r.cycles, r.faults, r.queued, r.orders, r.compensated, v,
			r.repairs, r.runbookSteps, r.perTxn(), r.batchMax, r.unavailable, r.backToQueued.Round(time.Millisecond), current,
			r.toOrderP99.Round(time.Millisecond), r.tailP99.Round(time.Millisecond), r.took.Round(time.Second))
	}
	_ = w.Flush()
	return b.String()
}

func runScenario(ctx context.Context, c config, bin, dir string, s scenario) (row, error) {
	r := row{name: s.name}
	pgStock, redisStock := int64(1_000_000), int64(1_000_000)
	if s.lowStock {
		pgStock = 30
	}
	if s.sentinel {
		// Whatever happens, the primary ends on its port: every other
		// client of the stack finds it there. After sl.close, so that
		// nothing writes while it moves.
		defer func() {
			cmd := exec.Command("hack/stack.sh", "redis-home")
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Printf("chaos: hack/stack.sh redis-home: %v\n%s", err, out)
			}
		}()
	}
	sl, err := openSale(ctx, c, bin, dir, s, pgStock, redisStock)
	if err != nil {
		return r, err
	}
	defer sl.close()
	rctx, stopReconcile := context.WithCancel(ctx)
	defer stopReconcile()
	go sl.reconcileEvery(rctx, 20*time.Second)

	tctx, stopTraffic := context.WithCancel(ctx)
	trafficDone := make(chan struct{})
	go func() { defer close(trafficDone); sl.traffic.run(tctx) }()
	payDone := make(chan struct{})
	go func() { defer close(payDone); sl.pay(tctx) }()
	stop := func() { stopTraffic(); <-trafficDone; <-payDone }
	defer func() {
		select {
		case <-trafficDone:
		default:
			stop()
		}
	}()
	// Warm: the first QUEUED answers.
	if err := until(30*time.Second, func() bool { return sl.traffic.count(gateway.CodeQueued) > 0 }); err != nil {
		return r, fmt.Errorf("no QUEUED answer before the fault: %w", err)
	}

	lastFault, err := inject(ctx, c, sl, s, &r)
	if err != nil {
		return r, err
	}
	// The sale goes on after the last fault: recovery is measured in it.
	time.Sleep(c.after)
	trafficEnd := time.Now()
	stop()
	r.unavailable = sl.traffic.unavailable.Load()
	if q := sl.traffic.queuedAfter(lastFault); q.IsZero() {
		return r, fmt.Errorf("no QUEUED answer in the %s after the last fault", c.after)
	} else if d := q.Sub(lastFault); d > r.backToQueued {
		r.backToQueued = d
	}
	r.gaveUp = sl.traffic.gaveUp.Load()

	// Settled: every workload running without its fault, the backlog done.
	var rep invariants.Report
	if s.sentinel {
		rep, r.runbookSteps, err = sl.settleByRunbook(ctx, c.settle)
	} else {
		rep, err = invariants.Await(ctx, invariants.Sources{Pool: sl.pool, Redis: sl.rs}, sl.activity,
			[]invariants.SKU{{ID: sku, Buckets: buckets}}, invariants.Expect{Settled: true}, c.settle)
	}
	if err != nil {
		return r, err
	}
	// Inbox rows of one transaction share its xmin.
	if err := sl.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint, count(*), coalesce(max(n), 0)::bigint FROM (
		SELECT i.xmin::text, count(*) AS n FROM consumer_inbox i JOIN inventory_reservation r USING (reservation_id)
		WHERE r.activity_id = $1 AND i.consumer_group = $2 GROUP BY 1) AS b`,
		sl.activity, sl.mq.ConsumerGroup).Scan(&r.messages, &r.txns, &r.batchMax); err != nil {
		return r, fmt.Errorf("reading the order transactions: %w", err)
	}
	var reservations int64
	if err := sl.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE activity_id = $1),
		(SELECT count(*) FROM inventory_reservation WHERE activity_id = $1),
		(SELECT count(*) FROM compensation_task t JOIN inventory_reservation r USING (reservation_id) WHERE r.activity_id = $1),
		(SELECT count(*) FROM repair_task WHERE activity_id = $1)`,
		sl.activity).Scan(&r.orders, &reservations, &r.compensated, &r.repairs); err != nil {
		return r, fmt.Errorf("reading the sale: %w", err)
	}
	p99 := func(from, to time.Time) (time.Duration, error) {
		var v float64
		err := sl.pool.QueryRow(ctx, `SELECT coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM o.created_at - r.reserved_at)), 0)
			FROM orders o JOIN inventory_reservation r USING (reservation_id)
			WHERE o.activity_id = $1 AND r.reserved_at >= $2 AND r.reserved_at < $3`, sl.activity, from, to).Scan(&v)
		if err != nil {
			return 0, fmt.Errorf("reading reservation → order after the fault: %w", err)
		}
		return time.Duration(v * float64(time.Second)), nil
	}
	if r.toOrderP99, err = p99(lastFault, lastFault.Add(time.Minute)); err != nil {
		return r, err
	}
	if r.tailP99, err = p99(trafficEnd.Add(-10*time.Second), trafficEnd); err != nil {
		return r, err
	}
	r.queued = int64(sl.traffic.count(gateway.CodeQueued))
	rep.Add("every QUEUED answer recorded in PostgreSQL", reservations == r.queued, "%d reservations, %d QUEUED", reservations, r.queued)
	rep.Add("every buyer answered (none gave up after 60 s of retries)", r.gaveUp == 0, "%d gave up", r.gaveUp)
	r.failed = rep.Failed()
	r.violations = len(r.failed)
	if r.violations > 0 {
		fmt.Print(rep.String())
	}
	return r, nil
}

// inject applies the scenario's fault c.cycles times (a real fault
// c.cycles/per times, at least once) and returns when the last one ended.
func inject(ctx context.Context, c config, sl *sale, s scenario, r *row) (time.Time, error) {
	limit := time.Duration(c.cycles)*20*time.Second + time.Minute
	switch {
	case s.workload != "":
		p := sl.procs[s.workload][0]
		if err := p.arm(s.name, s.odds); err != nil {
			return time.Time{}, err
		}
		err := until(limit, func() bool { return p.crashes.Load() >= int64(c.cycles) })
		r.cycles, r.faults = p.crashes.Load(), p.crashes.Load()
		if derr := p.arm("", 0); derr != nil {
			return time.Time{}, derr
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("%d of %d crashes at %s: %w", r.cycles, c.cycles, s.name, err)
		}
		return time.Now(), nil
	case s.commitLoss:
		px := sl.proxy
		half := int64(max(1, c.cycles/2))
		px.Inject(pgproxy.LoseReply, -1, 3, nil)
		err := until(limit, func() bool { return px.Faults.Load() >= half })
		if err == nil {
			px.Inject(pgproxy.CutBefore, -1, 3, nil)
			err = until(limit, func() bool { return px.Faults.Load() >= int64(c.cycles) })
		}
		px.Inject(pgproxy.None, 0, 1, nil)
		r.cycles, r.faults = px.Faults.Load(), px.Faults.Load()
		if err != nil {
			return time.Time{}, fmt.Errorf("%d of %d COMMITs lost: %w", r.cycles, c.cycles, err)
		}
		return time.Now(), nil
	case s.backlog:
		n := max(1, c.cycles/s.per)
		var last time.Time
		for i := 0; i < n; i++ {
			for _, p := range sl.procs["consumer"] {
				if err := p.freeze(true); err != nil {
					return last, err
				}
			}
			time.Sleep(time.Duration(s.faultFor) * time.Second)
			for _, p := range sl.procs["consumer"] {
				if err := p.freeze(false); err != nil {
					return last, err
				}
			}
			last = time.Now()
			r.cycles++
			r.faults++
			// The guard paused during the freeze (the oldest undecided
			// reservation passed its threshold) and resumes once the
			// consumers caught up.
			if err := until(2*time.Minute, func() bool { return !sl.guard.pausedNow() }); err != nil {
				return last, fmt.Errorf("the backlog guard did not resume within 2 min of the consumers thawing")
			}
			r.guardPauses = sl.guard.pauses()
			if r.guardPauses < int64(i+1) {
				return last, fmt.Errorf("the backlog guard did not pause during freeze %d (%d pauses seen)", i+1, r.guardPauses)
			}
			time.Sleep(2 * time.Second)
		}
		return last, nil
	case s.randomKills:
		victims := append([]*proc{}, sl.all[1:]...) // all but the channel
		for i := 0; i < c.cycles; i++ {
			time.Sleep(time.Duration(300+rand.IntN(1500)) * time.Millisecond) //nolint:gosec // chaos, not crypto
			if err := pick(victims).kill(); err != nil {
				return time.Time{}, err
			}
			r.cycles++
			r.faults++
		}
		return time.Now(), nil
	default:
		n := max(1, c.cycles/s.per)
		var last time.Time
		for i := 0; i < n; i++ {
			cmd := exec.CommandContext(ctx, "hack/stack.sh", "fault", s.fault, fmt.Sprint(s.faultFor)) //nolint:gosec // our own script
			cmd.Stdout, cmd.Stderr = sl.log, sl.log
			if err := cmd.Run(); err != nil {
				return time.Time{}, fmt.Errorf("hack/stack.sh fault %s: %w", s.fault, err)
			}
			last = time.Now()
			r.cycles++
			r.faults++
			// Back to QUEUED before the next one (the recovery of each).
			if err := until(30*time.Second, func() bool { return !sl.traffic.queuedAfter(last).IsZero() }); err != nil {
				return last, fmt.Errorf("no QUEUED answer within 30 s of %s ending", s.fault)
			}
			if d := sl.traffic.queuedAfter(last).Sub(last); d > r.backToQueued {
				r.backToQueued = d
			}
			// Orders current again before the next one: reservation →
			// order back under 3 s, at most a minute after the fault ended
			// (a scenario whose PostgreSQL runs out of stock makes no orders
			// to time).
			if !s.lowStock {
				d, ok, err := sl.ordersCurrent(ctx, last, time.Minute)
				if err != nil {
					return last, err
				}
				if !ok {
					r.slowRecoveries++
				}
				r.toCurrent = max(r.toCurrent, d)
			}
			time.Sleep(2 * time.Second)
		}
		return last, nil
	}
}

// until polls ok every 100 ms for up to d.
func until(d time.Duration, ok func() bool) error {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
