package main_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/payment"
)

// The payments workload as a process: a signed success callback pays the
// order once; the replay is answered as already paid.
func TestPaymentsCommand(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	pool := testenv.Database(t)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock, price_cents, currency) VALUES ($1, 1, 2, 2, 2500, 'CNY')`, activity)
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	msg := events.NewOrderCreateRequested(ids.NewRandom(), ids.NewRandom(), ids.NewRandom(), activity, 1, 5, -1, now, now+300_000, "t")
	raw, _ := msg.Marshal()
	out, err := (&orderstore.Consumer{Pool: pool, Group: "g", PaymentWindow: time.Minute}).Consume(ctx, msg, raw)
	require.NoError(t, err)

	// Two keys while the provider rotates: the old one and the next; the
	// callbacks below are signed with the next.
	oldKey, key := []byte("simulated-provider-key-0123456789"), []byte("simulated-provider-key-next-98765")
	addr := freeAddr(t)
	startProcess(t, bin, "payments", "-pg-dsn", pool.Config().ConnString(), "-addr", addr,
		"-payment-keys", "sim:"+hex.EncodeToString(oldKey)+",sim:"+hex.EncodeToString(key))
	waitReady(t, addr)
	body, _ := json.Marshal(map[string]any{"transaction_id": "sim-1", "order_id": out.OrderID.String(), "amount_cents": 2500,
		"currency": "CNY", "status": "SUCCESS", "paid_at_ms": time.Now().UnixMilli()})
	for _, want := range []string{payment.ResultPaid, payment.ResultAlreadyPaid} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/payments/sim/callbacks", bytes.NewReader(body))
		payment.SignedHeaders(req.Header, key, time.Now(), body)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var r struct{ Code string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, want, r.Code)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'PAID'`, out.OrderID).Scan(&n))
	require.Equal(t, 1, n)
}
