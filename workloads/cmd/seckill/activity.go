package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/migrations"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

const activityUsage = `usage: seckill activity <provision|window|roles|status|guard> [flags]

The store operations the operator makes for a SeckillActivity, for running
the workloads without Kubernetes:
  provision  migrate PostgreSQL, then set each SKU's stock in PostgreSQL and
             in every Redis bucket, once per -generation (stock only grows)
  window     set the sale window (NOT_STARTED, ACTIVE, PAUSED, ENDED) in every
             Redis bucket and in activity_control, with the durations
  roles      migrate PostgreSQL, then give each workload its own login role
             with only its grants (as the operator does), and write each
             workload's DSN to -out (kept: a second run changes nothing)
  status     what the stores hold: stock per SKU and bucket, window, backlog,
             stock moves in transit, the last reconcile run
  guard      the operator's backlog guard: pause time-driven compensation
             while the oldest undecided reservation is older than
             -pause-after, resume below half of it; once, or every -every

Every command takes the common flags (-pg-dsn, -redis-addrs, -activity-id,
-skus, ...; environment defaults as for the workloads).
`

func runActivity(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, activityUsage)
		return usageError{errors.New("a subcommand is required: provision, window, roles, status or guard")}
	}
	switch args[0] {
	case "provision":
		return activityProvision(ctx, args[1:], os.Stdout)
	case "window":
		return activityWindow(ctx, args[1:], os.Stdout)
	case "roles":
		return activityRoles(ctx, args[1:], os.Stdout)
	case "status":
		return activityStatus(ctx, args[1:], os.Stdout)
	case "guard":
		return activityGuard(ctx, args[1:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(activityUsage)
		return nil
	}
	fmt.Fprint(os.Stderr, activityUsage)
	return usageError{fmt.Errorf("unknown subcommand %q: want provision, window, roles, status or guard", args[0])}
}

// activityStore opens the activity's stores after the flags were checked.
func activityStore(ctx context.Context, c *config.Common, closers *[]func() error) (*control.Store, []control.SKU, error) {
	skus := controlSKUs(c)
	pool, err := openPG(ctx, c, closers)
	if err != nil {
		return nil, nil, err
	}
	rdb, err := openRedis(ctx, c, closers)
	if err != nil {
		return nil, nil, err
	}
	return &control.Store{Pool: pool, Redis: redisstore.New(rdb)}, skus, nil
}

// controlSKUs are -skus as the store operations take them (checked by the
// caller: Need.Slots).
func controlSKUs(c *config.Common) []control.SKU {
	list, _ := c.SKUBuckets()
	skus := make([]control.SKU, 0, len(list))
	for _, s := range list {
		skus = append(skus, control.SKU{ID: s.ID, Buckets: s.Buckets})
	}
	return skus
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// ParseStock parses -stock: sku=units,... for exactly the SKUs of -skus.
func ParseStock(v string, skus []config.SKUBuckets) (map[int64]int64, error) {
	return parsePerSKU("-stock", "units", 0, v, skus)
}

// ParsePrice parses -price: sku=cents,... for exactly the SKUs of -skus.
func ParsePrice(v string, skus []config.SKUBuckets) (map[int64]int64, error) {
	return parsePerSKU("-price", "cents", 1, v, skus)
}

// parsePerSKU parses flag's sku=value,... (value >= least) for exactly the
// SKUs of -skus.
func parsePerSKU(flag, what string, least int64, v string, skus []config.SKUBuckets) (map[int64]int64, error) {
	if v == "" {
		return nil, fmt.Errorf("%s is required (sku=%s,...)", flag, what)
	}
	known := map[int64]bool{}
	for _, s := range skus {
		known[s.ID] = true
	}
	out := map[int64]int64{}
	for _, part := range strings.Split(v, ",") {
		k, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		sku, err1 := strconv.ParseInt(k, 10, 64)
		units, err2 := strconv.ParseInt(n, 10, 64)
		if !ok || err1 != nil || err2 != nil || units < least {
			return nil, fmt.Errorf("%s entry %q: want sku=%s with %s >= %d", flag, part, what, what, least)
		}
		if !known[sku] {
			return nil, fmt.Errorf("%s names SKU %d, which -skus does not list", flag, sku)
		}
		if _, dup := out[sku]; dup {
			return nil, fmt.Errorf("%s names SKU %d twice", flag, sku)
		}
		out[sku] = units
	}
	for _, s := range skus {
		if _, ok := out[s.ID]; !ok {
			return nil, fmt.Errorf("%s has no entry for SKU %d of -skus", flag, s.ID)
		}
	}
	return out, nil
}

func activityProvision(ctx context.Context, args []string, w io.Writer) error {
	var c config.Common
	fs := flag.NewFlagSet("activity provision", flag.ContinueOnError)
	c.Bind(fs)
	stock := fs.String("stock", "", "units per SKU: sku=units,... (every SKU of -skus)")
	price := fs.String("price", "", "price per SKU in cents: sku=cents,... (every SKU of -skus); each order carries its SKU's price and a payment must match it")
	currency := fs.String("currency", "CNY", "currency of the prices (ISO 4217)")
	gen := fs.Int64("generation", 1, "provisioning generation: a stock change needs a higher one (as the manifest's metadata.generation)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	errs := []error{c.Check(config.Need{PG: true, Redis: true, Slots: true})}
	list, _ := c.SKUBuckets()
	units, err := ParseStock(*stock, list)
	errs = append(errs, err)
	prices, err := ParsePrice(*price, list)
	errs = append(errs, err)
	if !currencyCode.MatchString(*currency) {
		errs = append(errs, fmt.Errorf("-currency %q: want three capital letters (ISO 4217)", *currency))
	}
	if *gen <= 0 {
		errs = append(errs, errors.New("-generation must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	var closers []func() error
	defer closeAll(&closers)
	store, skus, err := activityStore(ctx, &c, &closers)
	if err != nil {
		return err
	}
	if _, err := migrations.Up(ctx, store.Pool); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	for _, sku := range skus {
		sku.Stock, sku.PriceCents, sku.Currency = units[sku.ID], prices[sku.ID], *currency
		p, err := store.Provision(ctx, c.ActivityID, sku, *gen)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "SKU %d: %d units at %d %s, generation %d: PostgreSQL %s, Redis buckets %s\n",
			sku.ID, sku.Stock, sku.PriceCents, sku.Currency, *gen, p.Postgres, strings.Join(p.Redis, " "))
		if !p.Changed() {
			fmt.Fprintf(w, "  nothing changed: generation %d was applied before (a stock change needs a higher -generation)\n", *gen)
		}
	}
	return nil
}

func activityWindow(ctx context.Context, args []string, w io.Writer) error {
	var c config.Common
	fs := flag.NewFlagSet("activity window", flag.ContinueOnError)
	c.Bind(fs)
	state := fs.String("state", "", "NOT_STARTED, ACTIVE, PAUSED or ENDED")
	deadline := fs.Duration("business-deadline", 0, "business deadline of a reservation, recorded in activity_control (0: keep the recorded one, 5m when none)")
	payment := fs.Duration("payment-window", 0, "payment window of the orders created from now on, recorded in activity_control, where the order consumers read it (0: keep the recorded one, 15m when none)")
	gen := fs.Int64("generation", 0, "generation recorded with the window (0: keep the recorded one, 1 when none)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	errs := []error{c.Check(config.Need{PG: true, Redis: true, Slots: true})}
	if !redisstore.ValidWindow(*state) {
		errs = append(errs, fmt.Errorf("-state %q: want NOT_STARTED, ACTIVE, PAUSED or ENDED", *state))
	}
	if *deadline < 0 || *payment < 0 || *gen < 0 {
		errs = append(errs, errors.New("-business-deadline, -payment-window and -generation must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	var closers []func() error
	defer closeAll(&closers)
	store, skus, err := activityStore(ctx, &c, &closers)
	if err != nil {
		return err
	}
	// What is left 0 keeps the recorded value: moving the window never
	// resets the durations by accident.
	cur, err := store.ReadControl(ctx, c.ActivityID)
	if err != nil {
		return err
	}
	st := control.Settings{Window: *state, BusinessDeadline: 5 * time.Minute, PaymentWindow: orderstore.DefaultPaymentWindow, Generation: 1}
	if cur != nil {
		st.BusinessDeadline, st.PaymentWindow = cur.BusinessDeadline, cur.PaymentWindow
		if cur.Generation > 0 {
			st.Generation = cur.Generation
		}
	}
	if *deadline > 0 {
		st.BusinessDeadline = *deadline
	}
	if *payment > 0 {
		st.PaymentWindow = *payment
	}
	if *gen > 0 {
		st.Generation = *gen
	}
	if err := store.SetWindow(ctx, c.ActivityID, skus, st); err != nil {
		return err
	}
	fmt.Fprintf(w, "activity %d: window %s in %d SKU(s) and activity_control (business deadline %s, payment window %s, generation %d)\n",
		c.ActivityID, *state, len(skus), st.BusinessDeadline, st.PaymentWindow, st.Generation)
	return nil
}

func activityStatus(ctx context.Context, args []string, w io.Writer) error {
	var c config.Common
	fs := flag.NewFlagSet("activity status", flag.ContinueOnError)
	c.Bind(fs)
	jsonOut := fs.Bool("json", false, "print JSON instead of text")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if err := c.Check(config.Need{PG: true, Redis: true, Slots: true}); err != nil {
		return usageError{err}
	}
	var closers []func() error
	defer closeAll(&closers)
	store, skus, err := activityStore(ctx, &c, &closers)
	if err != nil {
		return err
	}
	st, err := store.Status(ctx, c.ActivityID, skus, time.Now())
	if err != nil {
		return err
	}
	if *jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(w, st)
	return nil
}

// activityGuard runs the operator's backlog guard (control.GuardDecision)
// where there is no operator: once, or every -every until ctx ends. It
// prints a line whenever the flag moves.
func activityGuard(ctx context.Context, args []string, w io.Writer) error {
	var c config.Common
	fs := flag.NewFlagSet("activity guard", flag.ContinueOnError)
	c.Bind(fs)
	after := fs.Duration("pause-after", control.DefaultPauseAfter, "pause while the oldest undecided reservation is older than this")
	every := fs.Duration("every", 0, "run again at this period until stopped (0: once)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if err := c.Check(config.Need{PG: true, Redis: true, Slots: true}); err != nil {
		return usageError{err}
	}
	if *after <= 0 || *every < 0 {
		return usageError{fmt.Errorf("-pause-after must be positive and -every not negative, got %s and %s", *after, *every)}
	}
	var closers []func() error
	defer closeAll(&closers)
	store, skus, err := activityStore(ctx, &c, &closers)
	if err != nil {
		return err
	}
	for {
		pause, changed, reason, err := store.Guard(ctx, c.ActivityID, skus, *after, time.Now())
		switch {
		case err != nil && (*every == 0 || ctx.Err() != nil):
			return err
		case err != nil:
			fmt.Fprintf(w, "%s backlog guard: %v (tried again in %s)\n", time.Now().Format(time.RFC3339), err, *every)
		case changed || *every == 0:
			fmt.Fprintf(w, "%s compensation paused %t: %s\n", time.Now().Format(time.RFC3339), pause, reason)
		}
		if *every == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*every):
		}
	}
}

func printStatus(w io.Writer, st control.Status) {
	fmt.Fprintf(w, "activity %d at %s\n", st.Activity, st.CheckedAt.Format(time.RFC3339))
	if c := st.Control; c != nil {
		fmt.Fprintf(w, "window %s (generation %d, business deadline %s, payment window %s, compensation paused %t %s)\n",
			c.Window, c.Generation, c.BusinessDeadline, c.PaymentWindow, c.CompensationPaused, c.PauseReason)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SKU\tstore\tinitial\tavailable\topen/occupied\tcommitted/sold\tmoved in/out\twindow")
	for _, s := range st.SKUs {
		p := s.Postgres
		fmt.Fprintf(tw, "%d\tPostgreSQL\t%d\t%d\t%d\t%d\t\t\n", s.ID, p.Initial, p.Available, p.Occupied, p.Sold)
		for _, b := range s.Buckets {
			fmt.Fprintf(tw, "%d\tRedis %s\t%d\t%d\t%d\t%d\t%d/%d\t%s\n", s.ID, b.Slot, b.Initial, b.Available, b.OpenReserved, b.Committed, b.MovedIn, b.MovedOut, b.Window)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "order-create backlog: %d open, oldest %s\n", st.Backlog.Open, st.Backlog.OldestAge.Round(time.Millisecond))
	if st.LastRun != nil {
		fmt.Fprintf(w, "last reconcile run: %+v\n", *st.LastRun)
	} else {
		fmt.Fprintln(w, "last reconcile run: none")
	}
	if len(st.Problems) == 0 {
		fmt.Fprintln(w, "problems: none")
		return
	}
	fmt.Fprintln(w, "problems:")
	for _, p := range st.Problems {
		fmt.Fprintln(w, "  - "+p)
	}
}
