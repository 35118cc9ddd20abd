package salekit

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/pgroles"
)

// Roles are a local sale's PostgreSQL roles, one per workload, made as the
// operator makes them: each process runs with only its own grants, so a
// statement a workload's role may not run fails the sale here first.
type Roles struct {
	pool  *pgxpool.Pool
	names []string
	dsns  map[string]string
}

// workloadRole is the role of a workloads subcommand ("": no PostgreSQL).
var workloadRole = map[string]string{
	"gateway": pgroles.Gateway, "consumer": pgroles.Consumer, "projector": pgroles.Projector, "relay": pgroles.Relay,
	"compensator": pgroles.Compensator, "canceller": pgroles.Canceller, "payments": pgroles.Payments, "reconcile": pgroles.Reconcile,
}

// NewRoles creates the roles of the sale identified by sale (with
// passwords of its own) through pool, whose DSN is dsn.
func NewRoles(ctx context.Context, pool *pgxpool.Pool, dsn, sale string) (*Roles, error) {
	r := &Roles{pool: pool, dsns: map[string]string{}}
	for _, role := range pgroles.Roles() {
		name, pw := pgroles.Name(sale, role), RandomHex(24)
		if err := pgroles.Ensure(ctx, pool, name, role, pw); err != nil {
			r.Close()
			return nil, err
		}
		r.names = append(r.names, name)
		d, err := pgroles.DSN(dsn, name, pw)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.dsns[role] = d
	}
	return r, nil
}

// Env is env with the DSN of workload's role (none for a workload that
// does not use PostgreSQL; the operator's own commands keep env's).
func (r *Roles) Env(workload string, env []string) []string {
	out := slices.Clone(env)
	switch role, ok := workloadRole[workload]; {
	case ok:
		out = append(out, fmt.Sprintf("%s=%s", names.EnvPGDSN, r.dsns[role]))
	case workload == "scanner":
		out = append(out, names.EnvPGDSN+"=")
	}
	return out
}

// Close drops the roles.
func (r *Roles) Close() {
	for _, n := range r.names {
		_ = pgroles.Drop(context.Background(), r.pool, n)
	}
}
