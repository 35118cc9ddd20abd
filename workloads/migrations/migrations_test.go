package migrations_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/migrations"
)

func TestUpOnFreshDatabaseIsIdempotentAndConcurrent(t *testing.T) {
	pool, _ := testenv.EmptyDatabase(t)
	ctx := context.Background()
	latest, err := migrations.Latest()
	require.NoError(t, err)
	require.GreaterOrEqual(t, latest, int64(2))

	// Several replicas starting at once: the session lock serialises them.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			v, err := migrations.Up(ctx, pool)
			if err == nil && v != latest {
				err = errors.New("wrong version")
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, table := range []string{"sku_inventory", "inventory_reservation", "orders", "consumer_inbox",
		"event_outbox", "compensation_task", "inventory_ledger", "payment_record", "repair_task",
		"activity_control", "consumer_heartbeat", "reconcile_run", "reconcile_anomaly", "message_quarantine"} {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok))
		require.True(t, ok, table)
	}
}

// constraint returns the violated constraint name of err ("" if none).
func constraint(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.ConstraintName
	}
	return ""
}

func TestConstraintsRejectViolatingRows(t *testing.T) {
	pool := testenv.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec := func(sql string, args ...any) error { _, err := pool.Exec(ctx, sql, args...); return err }

	require.NoError(t, exec(`INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES (1, 1, 10, 10)`))
	require.NoError(t, exec(`INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
		VALUES ('00000000-0000-8000-8000-000000000001', '00000000-0000-7000-8000-000000000001', 1, 1, 7, '00000000-0000-8000-8000-0000000000a1', 'RESERVED', now(), now())`))
	require.NoError(t, exec(`INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, expires_at)
		VALUES ('00000000-0000-7000-8000-00000000000a', 1, 1, 7, '00000000-0000-7000-8000-000000000001', '00000000-0000-8000-8000-000000000001', now())`))

	cases := []struct {
		name, sql, constraint string
	}{
		{"conservation broken", `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES (1, 2, 10, 9)`, "ck_sku_inventory_conservation"},
		{"negative stock", `UPDATE sku_inventory SET available_stock = -1, occupied_stock = 11 WHERE sku_id = 1`, "ck_sku_inventory_non_negative"},
		{"unknown reservation status", `UPDATE inventory_reservation SET status = 'LOST'`, "ck_inventory_reservation_status"},
		{"same request twice", `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
			VALUES ('00000000-0000-8000-8000-000000000002', '00000000-0000-7000-8000-000000000001', 1, 1, 7, '00000000-0000-8000-8000-0000000000a2', 'RESERVED', now(), now())`, "inventory_reservation_user_id_request_id_key"},
		{"same message twice", `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
			VALUES ('00000000-0000-8000-8000-000000000003', '00000000-0000-7000-8000-000000000003', 1, 1, 8, '00000000-0000-8000-8000-0000000000a1', 'RESERVED', now(), now())`, "inventory_reservation_message_id_key"},
		{"second order for a user", `INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, expires_at)
			VALUES ('00000000-0000-7000-8000-00000000000b', 1, 1, 7, '00000000-0000-7000-8000-000000000002', '00000000-0000-8000-8000-000000000009', now())`, "uq_orders_activity_sku_user"},
		{"second order for a reservation", `INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, expires_at)
			VALUES ('00000000-0000-7000-8000-00000000000c', 1, 1, 8, '00000000-0000-7000-8000-000000000002', '00000000-0000-8000-8000-000000000001', now())`, "uq_orders_reservation_id"},
		{"unknown order status", `UPDATE orders SET status = 'SHIPPED'`, "ck_orders_status"},
		{"short payload hash", `INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, payload_hash, result_code)
			VALUES ('g', '00000000-0000-8000-8000-0000000000a1', 't', 'e', '\x00', 'PROCESSING')`, "ck_consumer_inbox_hash"},
		{"unknown outbox status", `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload, status)
			VALUES ('00000000-0000-7000-8000-0000000000e1', 'ORDER', '00000000-0000-7000-8000-00000000000a', 'ORDER_CREATED', 1, 'k', '{}', 'LOST')`, "ck_event_outbox_status"},
		{"outbox SENDING without lease", `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload, status)
			VALUES ('00000000-0000-7000-8000-0000000000e2', 'ORDER', '00000000-0000-7000-8000-00000000000a', 'ORDER_CREATED', 1, 'k', '{}', 'SENDING')`, "ck_event_outbox_lease"},
		{"unbalanced ledger entry", `INSERT INTO inventory_ledger (activity_id, sku_id, idempotency_key, entry_type, delta_available) VALUES (1, 1, 'OCCUPY:x', 'OCCUPY', -1)`, "ck_inventory_ledger_balanced"},
		{"unknown compensation status", `INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key, status)
			VALUES ('00000000-0000-7000-8000-0000000000c1', '00000000-0000-8000-8000-000000000001', 'RELEASE_REDIS_RESERVATION', 'k1', 'DONE')`, "ck_compensation_task_status"},
		{"window state", `INSERT INTO activity_control (activity_id, window_state) VALUES (1, 'OPEN')`, "ck_activity_control_window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := exec(c.sql)
			require.Error(t, err)
			require.Equal(t, c.constraint, constraint(err), err.Error())
		})
	}

	// Duplicates that must be refused by the idempotency keys.
	require.NoError(t, exec(`INSERT INTO inventory_ledger (activity_id, sku_id, idempotency_key, entry_type, delta_available, delta_occupied) VALUES (1, 1, 'OCCUPY:r1', 'OCCUPY', -1, 1)`))
	err := exec(`INSERT INTO inventory_ledger (activity_id, sku_id, idempotency_key, entry_type, delta_available, delta_occupied) VALUES (1, 1, 'OCCUPY:r1', 'OCCUPY', -1, 1)`)
	require.Equal(t, "uq_inventory_ledger_idempotency", constraint(err))

	require.NoError(t, exec(`INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, status)
		VALUES ('00000000-0000-7000-8000-0000000000f1', '00000000-0000-7000-8000-00000000000a', 'sim', 'tx1', 100, 'SUCCESS')`))
	err = exec(`INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, status)
		VALUES ('00000000-0000-7000-8000-0000000000f2', '00000000-0000-7000-8000-00000000000a', 'sim', 'tx1', 100, 'SUCCESS')`)
	require.Equal(t, "uq_payment_provider_transaction", constraint(err))

	// Two running reconciles of one activity are refused.
	require.NoError(t, exec(`INSERT INTO reconcile_run (run_id, activity_id, watermark) VALUES ('00000000-0000-7000-8000-0000000000d1', 1, now())`))
	err = exec(`INSERT INTO reconcile_run (run_id, activity_id, watermark) VALUES ('00000000-0000-7000-8000-0000000000d2', 1, now())`)
	require.Equal(t, "uq_reconcile_run_active", constraint(err))
}
