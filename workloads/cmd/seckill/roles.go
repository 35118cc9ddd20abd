package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/migrations"
	"github.com/seckill/seckill-operator/workloads/pgroles"
)

// activityRoles is `seckill activity roles`: the operator's per-workload
// PostgreSQL roles (pgroles.Grants) for the workloads run by hand. The roles
// are named after the activity id (pgroles.Name("activity-<id>", role)); the
// DSNs — the -pg-dsn's host, database and TLS settings with each role's login
// — go to -out, a file a shell sources. Passwords already in -out are kept,
// so a second run changes nothing; -rotate makes new ones (the old DSNs stop
// working); -drop removes the roles and the file.
func activityRoles(ctx context.Context, args []string, w io.Writer) error {
	var c config.Common
	fs := flag.NewFlagSet("activity roles", flag.ContinueOnError)
	c.Bind(fs)
	out := fs.String("out", "", "file for each workload's DSN (SECKILL_PG_DSN_GATEWAY='…' lines, mode 0600); required")
	rotate := fs.Bool("rotate", false, "new passwords for every role")
	drop := fs.Bool("drop", false, "drop the activity's roles and remove -out")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	errs := []error{c.Check(config.Need{PG: true})}
	if c.ActivityID <= 0 {
		errs = append(errs, errors.New("-activity-id must be positive"))
	}
	if *out == "" {
		errs = append(errs, errors.New("-out is required: the file the DSNs are written to"))
	}
	if *rotate && *drop {
		errs = append(errs, errors.New("-rotate and -drop exclude each other"))
	}
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	var closers []func() error
	defer closeAll(&closers)
	pool, err := c.Postgres(ctx)
	if err != nil {
		return err
	}
	closers = append(closers, func() error { pool.Close(); return nil })
	identity := fmt.Sprint("activity-", c.ActivityID)
	if *drop {
		for _, role := range pgroles.Roles() {
			if err := pgroles.Drop(ctx, pool, pgroles.Name(identity, role)); err != nil {
				return err
			}
		}
		if err := os.Remove(*out); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("removing %s: %w", *out, err)
		}
		fmt.Fprintf(w, "activity %d: the workloads' roles dropped, %s removed\n", c.ActivityID, *out)
		return nil
	}
	kept, err := pgroles.ReadEnvFile(*out)
	if err != nil {
		return err
	}
	if _, err := migrations.Up(ctx, pool); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	file := pgroles.EnvFile{}
	for _, role := range pgroles.Roles() {
		name := pgroles.Name(identity, role)
		pw := kept.Password(role, name)
		if pw == "" || *rotate {
			if pw, err = pgroles.NewPassword(); err != nil {
				return err
			}
		}
		if err := pgroles.Ensure(ctx, pool, name, role, pw); err != nil {
			return err
		}
		if file[role], err = pgroles.DSN(c.PGDSN, name, pw); err != nil {
			return err
		}
		var on []string
		for _, p := range pgroles.Grants[role] {
			if !p.Sequence {
				on = append(on, fmt.Sprintf("%s (%s)", p.On, p.What))
			}
		}
		fmt.Fprintf(w, "%-12s %s: %s\n", role, name, strings.Join(on, ", "))
	}
	header := fmt.Sprintf(`Written by seckill activity roles -activity-id %d: each workload's PostgreSQL
DSN, logging in as its own role with only its grants. Run a workload with its own:
  . %s; SECKILL_PG_DSN="$%s" seckill gateway
The send-scanner uses no PostgreSQL; activity provision/window/status and
migrate keep the DSN that owns the schema.`, c.ActivityID, *out, pgroles.EnvVar(pgroles.Gateway))
	if err := file.Write(*out, header); err != nil {
		return err
	}
	fmt.Fprintf(w, "activity %d: %d roles ready; their DSNs are in %s (%s, …)\n", c.ActivityID, len(file), *out, pgroles.EnvVar(pgroles.Gateway))
	return nil
}
