// Package pgroles gives each workload its own PostgreSQL login role with the
// privileges of the statements it runs and nothing more: the gateway, which
// faces the internet, can read a reservation's status and cannot write an
// order; no workload owns a table, so none can run DDL. The operator, whose
// role migrates the schema, creates the roles and grants (Ensure) and drops
// them when the activity goes (Drop).
package pgroles

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The workloads that connect to PostgreSQL, by role. The send-scanner
// reads only Redis and the broker: it has no role and no DSN.
const (
	Gateway     = "gateway"
	Consumer    = "consumer"
	Projector   = "projector"
	Relay       = "relay"
	Compensator = "compensator"
	Canceller   = "canceller"
	Payments    = "payments"
	Reconcile   = "reconcile"
)

// Privileges on one table (or sequence).
type Privileges struct {
	On   string
	What string // e.g. "SELECT, UPDATE"
	// Sequence: On is a sequence (USAGE for a bigserial column's inserts).
	Sequence bool
}

const (
	r   = "SELECT"
	ri  = "SELECT, INSERT"
	ru  = "SELECT, UPDATE"
	riu = "SELECT, INSERT, UPDATE"
)

var ledgerSeq = Privileges{On: "inventory_ledger_ledger_id_seq", What: "USAGE", Sequence: true}

// Grants is each role's table: what it may do on which table. Every
// statement a workload runs needs its row here (TestRolesRunTheirStatements
// plans each one under the role); anything else is refused.
var Grants = map[string][]Privileges{
	// Reads a reservation's status for GET /reservations/{id}; writes
	// nothing in PostgreSQL (its writes are Redis and the broker).
	Gateway: {{On: "inventory_reservation", What: r}},
	Consumer: {
		{On: "sku_inventory", What: ru},
		{On: "inventory_reservation", What: riu},
		{On: "orders", What: "SELECT, INSERT, DELETE"}, // DELETE: a commit-unknown order withdrawn before its retry
		{On: "consumer_inbox", What: riu},
		{On: "message_quarantine", What: ri},
		{On: "event_outbox", What: ri},
		{On: "compensation_task", What: ri},
		{On: "inventory_ledger", What: ri}, ledgerSeq,
		{On: "consumer_heartbeat", What: riu},
		{On: "activity_control", What: r},
	},
	Projector: {
		{On: "consumer_inbox", What: riu},
		{On: "message_quarantine", What: ri},
	},
	Relay: {{On: "event_outbox", What: ru}},
	Compensator: {
		{On: "compensation_task", What: ru},
		{On: "inventory_reservation", What: ru},
		{On: "activity_control", What: r},
	},
	Canceller: {
		{On: "orders", What: ru},
		{On: "inventory_reservation", What: r},
		{On: "sku_inventory", What: ru},
		{On: "inventory_ledger", What: ri}, ledgerSeq,
		{On: "event_outbox", What: ri},
		{On: "payment_record", What: riu},
		{On: "message_quarantine", What: ri},
		{On: "activity_control", What: r},
	},
	Payments: {
		{On: "orders", What: ru},
		{On: "sku_inventory", What: ru},
		{On: "inventory_ledger", What: ri}, ledgerSeq,
		{On: "event_outbox", What: ri},
		{On: "payment_record", What: riu},
		{On: "message_quarantine", What: riu},
	},
	// The reconcile job reads everything it compares and writes its runs,
	// anomalies and repairs (a repair may reject a timed-out reservation,
	// re-send an event, freeze a reservation) and deletes the activity's
	// sent outbox events and finished inbox rows past their retention. The
	// runbook's verbs run as this role too (kubectl seckill runbook: a Job
	// from the reconcile CronJob): its verify and evidence read the
	// quarantine.
	Reconcile: {
		{On: "message_quarantine", What: r},
		{On: "sku_inventory", What: r},
		{On: "orders", What: r},
		{On: "payment_record", What: r},
		{On: "inventory_ledger", What: r},
		{On: "consumer_inbox", What: "SELECT, DELETE"}, // retention
		{On: "consumer_heartbeat", What: r},
		{On: "activity_control", What: r},
		{On: "stock_provision", What: r},
		{On: "inventory_reservation", What: riu},
		{On: "compensation_task", What: riu},
		{On: "event_outbox", What: "SELECT, INSERT, UPDATE, DELETE"}, // retention
		{On: "reconcile_run", What: riu},
		{On: "reconcile_anomaly", What: ri},
		{On: "reconcile_anomaly_anomaly_id_seq", What: "USAGE", Sequence: true},
		{On: "repair_task", What: riu},
		{On: "reservation_freeze", What: "SELECT, INSERT, DELETE"},
	},
}

// Roles lists the roles, sorted.
func Roles() []string {
	out := make([]string, 0, len(Grants))
	for k := range Grants {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Name is the login role of one workload of one activity: PostgreSQL roles
// are global to the server, so it carries a digest of the activity's
// identity (its UID), short enough for the 63-byte limit.
func Name(activity, role string) string {
	h := sha256.Sum256([]byte(activity))
	return "seckill_" + hex.EncodeToString(h[:5]) + "_" + role
}

// NewPassword is a random password (hex: nothing to quote).
func NewPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ErrNoPrivilege: the operator's own role cannot create roles or grant.
var ErrNoPrivilege = errors.New("the operator's PostgreSQL role cannot create the workloads' roles (it needs CREATEROLE and to own the tables)")

// Ensure creates (or updates) the login role name with password and
// exactly the privileges of role: every earlier grant on the schema is
// revoked first, in the same transaction, so a privilege removed from
// Grants is removed from the database too.
func Ensure(ctx context.Context, pool *pgxpool.Pool, name, role, password string) error {
	grants, ok := Grants[role]
	if !ok {
		return fmt.Errorf("no grants for role %q", role)
	}
	if password == "" || strings.ContainsAny(password, "'\\") {
		return fmt.Errorf("role %s: the password must be non-empty and hold no quote or backslash", name)
	}
	ident := pgx.Identifier{name}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
			return fmt.Errorf("looking up role %s: %w", name, err)
		}
		verb := "ALTER"
		if !exists {
			verb = "CREATE"
		}
		// A password is no bind parameter in a utility statement; it is hex.
		stmts := []string{
			fmt.Sprintf("%s ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS PASSWORD '%s'", verb, ident, password),
			"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM " + ident,
			"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM " + ident,
			"REVOKE CREATE ON SCHEMA public FROM " + ident,
			"GRANT USAGE ON SCHEMA public TO " + ident,
		}
		for _, p := range grants {
			kind := "TABLE"
			if p.Sequence {
				kind = "SEQUENCE"
			}
			stmts = append(stmts, fmt.Sprintf("GRANT %s ON %s %s TO %s", p.What, kind, pgx.Identifier{p.On}.Sanitize(), ident))
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				if isPrivilege(err) {
					return fmt.Errorf("role %s: %w: %w", name, ErrNoPrivilege, err)
				}
				return fmt.Errorf("role %s: %s: %w", name, strings.SplitN(s, " PASSWORD", 2)[0], err)
			}
		}
		return nil
	})
}

// Drop removes a workload's role and its grants in this database. A role
// that is gone already is no error.
func Drop(ctx context.Context, pool *pgxpool.Pool, name string) error {
	ident := pgx.Identifier{name}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
			return fmt.Errorf("looking up role %s: %w", name, err)
		}
		if !exists {
			return nil
		}
		for _, s := range []string{"DROP OWNED BY " + ident, "DROP ROLE " + ident} {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("dropping role %s: %w", name, err)
			}
		}
		return nil
	})
}

func isPrivilege(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "42501" // insufficient_privilege
}

// DSN is dsn (a URL or key=value connection string) with its user and
// password replaced by a workload's role: same host, database and TLS
// settings as the operator's.
func DSN(dsn, user, password string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("the PostgreSQL URL does not parse") // the error may quote the password
		}
		u.User = url.UserPassword(user, password)
		return u.String(), nil
	}
	if strings.TrimSpace(dsn) == "" {
		return "", errors.New("empty PostgreSQL connection string")
	}
	// key=value: a later key wins in libpq's and pgx's parsers.
	return fmt.Sprintf("%s user='%s' password='%s'", dsn, user, password), nil
}

// SetParam is dsn with one connection parameter set (e.g. sslrootcert: the
// path where a workload's pod finds the CA), replacing the DSN's own.
func SetParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("the PostgreSQL URL does not parse")
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	if strings.ContainsAny(value, `'\`) {
		return "", fmt.Errorf("parameter %s: a value with a quote or backslash", key)
	}
	return fmt.Sprintf("%s %s='%s'", dsn, key, value), nil
}
