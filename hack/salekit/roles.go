package salekit

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/pgroles"
)

// Roles are a local sale's PostgreSQL roles, one per workload, made as a
// user of the process mode makes them (`seckill activity roles`, the grants
// the operator gives): each process runs with only its own grants, so a
// statement a workload's role may not run fails the sale here first.
type Roles struct {
	bin, file string
	env       []string
	dsns      pgroles.EnvFile
}

// workloadRole is the role of a workloads subcommand ("": no PostgreSQL).
var workloadRole = map[string]string{
	"gateway": pgroles.Gateway, "consumer": pgroles.Consumer, "projector": pgroles.Projector, "relay": pgroles.Relay,
	"compensator": pgroles.Compensator, "canceller": pgroles.Canceller, "payments": pgroles.Payments, "reconcile": pgroles.Reconcile,
}

// NewRoles runs `seckill activity roles -out DIR/roles.env` with env (the
// sale's settings: its activity id and the DSN that owns the schema) and
// reads the DSNs it wrote.
func NewRoles(bin string, env []string, dir string) (*Roles, error) {
	r := &Roles{bin: bin, env: env, file: filepath.Join(dir, "roles.env")}
	if out, err := Cmd(bin, env, "activity", "roles", "-out", r.file).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("seckill activity roles: %w\n%s", err, out)
	}
	dsns, err := pgroles.ReadEnvFile(r.file)
	if err != nil {
		return nil, err
	}
	for role := range pgroles.Grants {
		if dsns[role] == "" {
			return nil, fmt.Errorf("seckill activity roles wrote no DSN for %s", role)
		}
	}
	r.dsns = dsns
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

// Close drops the roles (`seckill activity roles -drop`).
func (r *Roles) Close() {
	_ = Cmd(r.bin, r.env, "activity", "roles", "-out", r.file, "-drop").Run()
}
