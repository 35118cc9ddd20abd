package pgroles_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/migrations"
	"github.com/seckill/seckill-operator/workloads/pgroles"
)

// statements each role runs: the embedded query files of the packages it
// runs (paths under workloads/, globs allowed).
var statements = map[string][]string{
	pgroles.Gateway: {"gateway/sql/*.sql"},
	pgroles.Consumer: {"orderstore/sql/compensation_insert.sql", "orderstore/sql/control_get.sql", "control/sql/heartbeat_upsert.sql",
		"inbox/sql/claim.sql", "inbox/sql/get.sql", "inbox/sql/finish.sql", "orderstore/sql/ledger_occupy.sql", "orderstore/sql/order_*.sql", "outbox/sql/insert.sql",
		"inbox/sql/quarantine.sql", "orderstore/sql/reservation_*.sql", "orderstore/sql/stock_*.sql", "outbox/sql/timer_insert.sql"},
	pgroles.Projector:   {"inbox/sql/projection.sql", "inbox/sql/quarantine.sql"},
	pgroles.Relay:       {"outbox/sql/backlog.sql", "outbox/sql/claim.sql", "outbox/sql/reclaim.sql", "outbox/sql/retry.sql", "outbox/sql/sent*.sql"},
	pgroles.Compensator: {"compensation/sql/*.sql"},
	pgroles.Canceller: {"cancel/sql/*.sql", "payment/sql/order_*.sql", "payment/sql/payment_*.sql", "payment/sql/stock_sell.sql", "payment/sql/ledger_sell.sql",
		"outbox/sql/insert.sql", "inbox/sql/quarantine.sql"},
	pgroles.Payments: {"payment/sql/*.sql", "outbox/sql/insert.sql", "inbox/sql/quarantine.sql"},
	pgroles.Reconcile: {"reconcile/sql/*.sql", "repair/sql/*.sql", "control/sql/inventory.sql", "control/sql/compensation_paused.sql",
		"orderstore/sql/control_get.sql", "orderstore/sql/reservation_*.sql", "orderstore/sql/compensation_insert.sql", "outbox/sql/insert.sql",
		"runbook/sql/*.sql", "invariants/sql/*.sql"},
}

func connectAs(t *testing.T, dsn, name, password string) *pgx.Conn {
	t.Helper()
	roleDSN, err := pgroles.DSN(dsn, name, password)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, roleDSN)
	if err != nil {
		t.Fatalf("connecting as %s: %v", name, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// migrated is a fresh migrated database with every role of one activity.
func migrated(t *testing.T, activity string) (pool *pgxpool.Pool, dsn string, passwords map[string]string) {
	t.Helper()
	pool, dsn = testenv.EmptyDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	passwords = map[string]string{}
	for _, role := range pgroles.Roles() {
		pw, err := pgroles.NewPassword()
		if err != nil {
			t.Fatal(err)
		}
		name := pgroles.Name(activity, role)
		if err := pgroles.Ensure(ctx, pool, name, role, pw); err != nil {
			t.Fatal(err)
		}
		passwords[role] = pw
		t.Cleanup(func() { _ = pgroles.Drop(context.Background(), pool, name) })
	}
	return pool, dsn, passwords
}

func isDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// Every statement a workload runs is planned under its role: planning checks
// the privileges of every table the statement touches, and runs nothing.
func TestRolesRunTheirStatements(t *testing.T) {
	activity := "uid-" + t.Name()
	_, dsn, passwords := migrated(t, activity)
	ctx := context.Background()
	for role, globs := range statements {
		conn := connectAs(t, dsn, pgroles.Name(activity, role), passwords[role])
		n := 0
		for _, g := range globs {
			files, err := filepath.Glob(filepath.Join("..", g))
			if err != nil || len(files) == 0 {
				t.Fatalf("%s: no query file matches %s", role, g)
			}
			for _, f := range files {
				b, err := os.ReadFile(f) //nolint:gosec // the repository's query files
				if err != nil {
					t.Fatal(err)
				}
				sd, err := conn.Prepare(ctx, "", "EXPLAIN "+string(b))
				if err == nil {
					args := make([]any, len(sd.ParamOIDs))
					_, err = conn.Exec(ctx, "EXPLAIN "+string(b), args...)
				}
				if err != nil {
					t.Errorf("%s cannot run %s: %v", role, f, err)
				}
				n++
			}
		}
		t.Logf("%s: %d statements planned under its role", role, n)
	}
}

// What each role must not do is refused by PostgreSQL.
func TestRolesAreRefusedTheRest(t *testing.T) {
	activity := "uid-" + t.Name()
	_, dsn, passwords := migrated(t, activity)
	ctx := context.Background()
	ddl := []string{
		"CREATE TABLE intruder (id int)",
		"DROP TABLE orders",
		"ALTER TABLE orders ADD COLUMN x int",
		"TRUNCATE inventory_ledger",
		"CREATE FUNCTION intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"CREATE ROLE intruder",
	}
	forbidden := map[string][]string{
		pgroles.Gateway: {
			"INSERT INTO orders (order_id) VALUES (gen_random_uuid())",
			"UPDATE sku_inventory SET available_stock = available_stock + 1",
			"UPDATE inventory_reservation SET status = 'ORDER_CREATED'",
			"SELECT * FROM payment_record",
			"SELECT * FROM orders",
		},
		pgroles.Projector: {"UPDATE sku_inventory SET available_stock = 0", "SELECT * FROM orders"},
		pgroles.Relay:     {"INSERT INTO orders (order_id) VALUES (gen_random_uuid())", "DELETE FROM event_outbox"},
		pgroles.Consumer:  {"UPDATE orders SET status = 'PAID'", "UPDATE payment_record SET status = 'SUCCESS'", "DELETE FROM inventory_ledger"},
		pgroles.Payments:  {"DELETE FROM orders", "UPDATE inventory_reservation SET status = 'ORDER_CREATED'"},
		pgroles.Reconcile: {"UPDATE orders SET status = 'PAID'", "UPDATE sku_inventory SET available_stock = 0"},
	}
	for _, role := range pgroles.Roles() {
		conn := connectAs(t, dsn, pgroles.Name(activity, role), passwords[role])
		for _, stmt := range append(forbidden[role], ddl...) {
			_, err := conn.Exec(ctx, stmt)
			switch {
			case err == nil:
				t.Errorf("%s ran %q", role, stmt)
			case !isDenied(err) && !strings.Contains(err.Error(), "must be owner"):
				t.Errorf("%s: %q failed, but not for want of privilege: %v", role, stmt, err)
			}
		}
	}
}

// A wrong password is refused (the stack's PostgreSQL checks passwords on
// TCP), and a dropped role cannot connect any more.
func TestRolePasswordAndDrop(t *testing.T) {
	activity := "uid-" + t.Name()
	pool, dsn, passwords := migrated(t, activity)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := pgroles.Name(activity, pgroles.Gateway)
	bad, _ := pgroles.DSN(dsn, name, passwords[pgroles.Gateway]+"x")
	if c, err := pgx.Connect(ctx, bad); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connected with a wrong password")
	}
	good, _ := pgroles.DSN(dsn, name, passwords[pgroles.Gateway])
	c, err := pgx.Connect(ctx, good)
	if err != nil {
		t.Fatalf("the right password: %v", err)
	}
	_ = c.Close(ctx)
	if err := pgroles.Drop(ctx, pool, name); err != nil {
		t.Fatal(err)
	}
	if err := pgroles.Drop(ctx, pool, name); err != nil {
		t.Fatalf("dropping a dropped role: %v", err)
	}
	if c, err := pgx.Connect(ctx, good); err == nil {
		_ = c.Close(ctx)
		t.Fatal("a dropped role connected")
	}
}

func TestDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://op:secret@db:5432/sale?sslmode=verify-full&sslrootcert=/ca.pem", "postgres://r:pw@db:5432/sale?sslmode=verify-full&sslrootcert=/ca.pem"},
		{"postgresql://db/sale", "postgresql://r:pw@db/sale"},
		{"host=db dbname=sale user=op password=secret sslmode=require", "host=db dbname=sale user=op password=secret sslmode=require user='r' password='pw'"},
	} {
		got, err := pgroles.DSN(tc.in, "r", "pw")
		if err != nil || got != tc.want {
			t.Errorf("DSN(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"postgres://r:pw@db/sale?sslmode=verify-full&sslrootcert=%2Fhost%2Fca.pem", "postgres://r:pw@db/sale?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.crt"},
		{"host=db sslmode=verify-full", "host=db sslmode=verify-full sslrootcert='/etc/ca.crt'"},
	} {
		got, err := pgroles.SetParam(tc.in, "sslrootcert", "/etc/ca.crt")
		if err != nil || got != tc.want {
			t.Errorf("SetParam(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := pgroles.DSN("", "r", "pw"); err == nil {
		t.Error("an empty DSN was accepted")
	}
	if n := pgroles.Name("0c6b3a8e-2f1d-4a57-9d7e-3f1b2c4d5e6f", pgroles.Compensator); len(n) > 63 || !strings.HasPrefix(n, "seckill_") {
		t.Errorf("role name %q", n)
	}
}
