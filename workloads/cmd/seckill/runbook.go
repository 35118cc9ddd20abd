package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/invariants"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/provider"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/repair"
	"github.com/seckill/seckill-operator/workloads/runbook"
)

const runbookUsage = `usage: seckill runbook <verb> [flags]   (design.md#runbook, the manual repair runbook)

verbs:
  freeze     step 1: reservation MANUAL_REVIEW, its compensation tasks MANUAL, its timers waiting
             -reservation ID | -order ID  -operator NAME -reason TEXT [-incident ID]
  evidence   step 2: everything about a request, reservation, message, order or payment id,
             ranked by authority (step 3): PostgreSQL, Redis, and optionally the broker,
             the payment channel and log files
             -id ID [-broker-query "mqadmin -n host:9876"] [-topics a,b]
             [-provider-url URL -provider-name NAME] [-logs file,file]
  list       open repair tasks (MANUAL and PENDING by default)  [-status S,S] [-json]
  show       one repair task with its audit trail               -repair-id HEX
  resolve    steps 4, 5, 7: close a MANUAL task through a standard step, audited
             -repair-id HEX -step STEP -operator NAME -approver NAME -reason TEXT [-incident ID]
             steps: rebuild-projection, compensate, release-cancelled, resend-outbox,
                    recount (a SKU's activity-level Redis calibration; needs -skus sku:buckets),
                    close-by-recount (a rejected reservation whose Redis key is gone, after a recount),
                    unfreeze, none (the decision needs no action), reject (no action; closed REJECTED)
  unfreeze   lift a freeze: the remembered state comes back
             -reservation ID -operator NAME -approver NAME -reason TEXT [-incident ID]
  verify     step 6: every invariant in PostgreSQL and Redis; exit 1 when one is broken  -activity-id N -skus sku:buckets [-settled] [-expect-manual-review N]

Every verb takes -pg-dsn (and -redis-addrs/-redis-mode where Redis is read) like the workloads.
`

func runRunbook(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Print(runbookUsage)
		if len(args) == 0 {
			return usageError{errors.New("a verb is required")}
		}
		return nil
	}
	verb, rest := args[0], args[1:]
	var c config.Common
	fs := flag.NewFlagSet("runbook "+verb, flag.ContinueOnError)
	c.Bind(fs)
	var (
		reservation = fs.String("reservation", "", "reservation id")
		order       = fs.String("order", "", "order id (freeze: its reservation)")
		id          = fs.String("id", "", "any id: request, reservation, message, order, payment or provider transaction")
		repairID    = fs.String("repair-id", "", "repair task id (hex)")
		step        = fs.String("step", "", "standard step of resolve")
		operator    = fs.String("operator", "", "who does it")
		approver    = fs.String("approver", "", "who approved it (not the operator)")
		reason      = fs.String("reason", "", "why (the evidence it rests on)")
		incident    = fs.String("incident", "", "incident id")
		status      = fs.String("status", "MANUAL,PENDING", "list: statuses")
		jsonOut     = fs.Bool("json", false, "list: JSON instead of a table")
		brokerQuery = fs.String("broker-query", "", `evidence: admin command prefix answering "queryMsgByKey -t T -k K"`)
		topics      = fs.String("topics", names.TopicOrderCreate+","+names.TopicOrderEvents+","+names.TopicOrderCancel, "evidence: topics to look the keys up in")
		providerURL = fs.String("provider-url", "", "evidence: payment channel base URL")
		providerNm  = fs.String("provider-name", "sim", "evidence: payment channel name")
		logs        = fs.String("logs", "", "evidence: comma-separated log files to search")
		settled     = fs.Bool("settled", false, "verify: the sale is over — nothing may be in flight (open reservations, unsent events, pending compensations)")
		frozen      = fs.Int64("expect-manual-review", 0, "verify: reservations the person verifying knows are frozen in MANUAL_REVIEW (any other count fails)")
	)
	if err := fs.Parse(rest); err != nil {
		return usageError{err}
	}
	needRedis := verb == "evidence" || verb == "resolve" || verb == "verify"
	if err := c.Check(config.Need{PG: true, Redis: needRedis}); err != nil {
		return usageError{err}
	}
	audit := repair.Audit{Operator: *operator, Approver: *approver, Reason: *reason, Incident: *incident}
	parseID := func(flagName, v string) (uuid.UUID, error) {
		u, err := uuid.Parse(v)
		if err != nil {
			return u, usageError{fmt.Errorf("-%s %q: want a UUID", flagName, v)}
		}
		return u, nil
	}
	// Validate before connecting: bad input writes nothing.
	switch verb {
	case "freeze":
		if (*reservation == "") == (*order == "") {
			return usageError{errors.New("freeze needs exactly one of -reservation or -order")}
		}
		if *operator == "" || *reason == "" {
			return usageError{errors.New("freeze needs -operator and -reason")}
		}
	case "unfreeze":
		if *reservation == "" {
			return usageError{errors.New("unfreeze needs -reservation")}
		}
		if err := audit.Check(); err != nil {
			return usageError{err}
		}
	case "evidence":
		if *id == "" {
			return usageError{errors.New("evidence needs -id")}
		}
		if *providerURL != "" {
			if u, err := url.Parse(*providerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageError{fmt.Errorf("-provider-url %q: want an http(s) URL", *providerURL)}
			}
		}
	case "show":
		if _, err := repair.ParseID(*repairID); err != nil {
			return usageError{err}
		}
	case "resolve":
		if _, err := repair.ParseID(*repairID); err != nil {
			return usageError{err}
		}
		if !slices.Contains(repair.StandardSteps, *step) {
			return usageError{fmt.Errorf("-step %q: want one of %s", *step, strings.Join(repair.StandardSteps, ", "))}
		}
		if *step == repair.StepRecount {
			if _, err := c.SKUBuckets(); err != nil {
				return usageError{fmt.Errorf("-step recount needs the SKU's buckets: %w", err)}
			}
		}
		if err := audit.Check(); err != nil {
			return usageError{err}
		}
	case "list":
		for _, s := range strings.Split(*status, ",") {
			switch s {
			case repair.Pending, repair.Applied, repair.Manual, repair.Rejected:
			default:
				return usageError{fmt.Errorf("-status %q: want PENDING, APPLIED, MANUAL or REJECTED", s)}
			}
		}
	case "verify":
	default:
		fmt.Fprint(os.Stderr, runbookUsage)
		return usageError{fmt.Errorf("unknown runbook verb %q", verb)}
	}

	var closers []func() error
	defer closeAll(&closers)
	pool, err := openPG(ctx, &c, &closers)
	if err != nil {
		return err
	}
	store := &repair.Store{Pool: pool}
	out := os.Stdout
	switch verb {
	case "freeze":
		var rid uuid.UUID
		if *order != "" {
			oid, err := parseID("order", *order)
			if err != nil {
				return err
			}
			if rid, err = store.ReservationOfOrder(ctx, oid); err != nil {
				return err
			}
		} else if rid, err = parseID("reservation", *reservation); err != nil {
			return err
		}
		t, err := store.Freeze(ctx, rid, audit, nil, nil)
		if err != nil {
			return err
		}
		return printJSON(out, t)
	case "unfreeze":
		rid, err := parseID("reservation", *reservation)
		if err != nil {
			return err
		}
		t, err := store.Unfreeze(ctx, rid, audit)
		if err != nil {
			return err
		}
		return printJSON(out, t)
	case "evidence":
		rdb, err := openRedis(ctx, &c, &closers)
		if err != nil {
			return err
		}
		src := runbook.Sources{Topics: config.SplitList(*topics), Logs: config.SplitList(*logs), BrokerQuery: strings.Fields(*brokerQuery)}
		if *providerURL != "" {
			src.Channel = &provider.Client{ProviderName: *providerNm, BaseURL: *providerURL}
		}
		g := &runbook.Gatherer{Pool: pool, Redis: redisstore.New(rdb), Sources: src}
		evs, err := g.Gather(ctx, *id)
		if err != nil {
			return err
		}
		return printJSON(out, evs)
	case "list":
		ts, err := store.List(ctx, c.ActivityID, config.SplitList(*status), 1000)
		if err != nil {
			return err
		}
		if *jsonOut {
			return printJSON(out, ts)
		}
		tw := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "REPAIR ID\tSTATUS\tRULE\tOBJECT\tACTIVITY\tCREATED\tREASON")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%d\t%s\t%s\n", t.IDHex, t.Status, t.Rule, t.ObjectType, t.ObjectID,
				t.Activity, t.CreatedAt.Format("2006-01-02 15:04:05"), t.Reason)
		}
		return tw.Flush()
	case "show":
		idb, _ := repair.ParseID(*repairID)
		t, err := store.Get(ctx, idb)
		if err != nil {
			return err
		}
		return printJSON(out, t)
	case "resolve":
		rdb, err := openRedis(ctx, &c, &closers)
		if err != nil {
			return err
		}
		idb, _ := repair.ParseID(*repairID)
		var skus []config.SKUBuckets // validated above for a recount; no other step reads them
		if *step == repair.StepRecount {
			skus, _ = c.SKUBuckets()
		}
		slots := func(activity, sku int64) ([]redisstore.Slot, bool) {
			for _, s := range skus {
				if s.ID == sku {
					return redisstore.Slots(activity, s.ID, s.Buckets), true
				}
			}
			return nil, false
		}
		steps := &repair.Steps{Pool: pool, Redis: redisstore.New(rdb), Owner: "runbook:" + audit.Operator}
		t, err := store.ResolveWith(ctx, steps, idb, *step, audit, slots)
		if errors.Is(err, repair.ErrStepMisfit) {
			return usageError{err}
		}
		if err != nil {
			return err
		}
		return printJSON(out, t)
	case "verify":
		rdb, err := openRedis(ctx, &c, &closers)
		if err != nil {
			return err
		}
		var skus []invariants.SKU // none named: found in PostgreSQL and Redis
		named, err := c.SKUBuckets()
		if err != nil {
			return usageError{err}
		}
		for _, s := range named {
			skus = append(skus, invariants.SKU{ID: s.ID, Buckets: s.Buckets})
		}
		v, err := runbook.Verify(ctx, pool, redisstore.New(rdb), c.ActivityID, skus,
			invariants.Expect{Settled: *settled, ManualReview: *frozen})
		if err != nil {
			return err
		}
		if err := printJSON(out, v); err != nil {
			return err
		}
		if failed := v.Failed(); len(failed) > 0 {
			return fmt.Errorf("%d invariants broken: %s", len(failed), strings.Join(failed, "; "))
		}
		return nil
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
