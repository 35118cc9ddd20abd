package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/provider"
)

// price is what every test order costs, in CNY.
const price = 2500

// success is the provider's success for order at its price.
func success(tx string, order uuid.UUID) payment.Callback {
	return payment.Callback{Provider: "sim", TransactionID: tx, OrderID: order, AmountCents: price, Currency: "CNY", PaidAt: time.Now()}
}

// newOrder makes a real order through the order transaction, at price.
func newOrder(t *testing.T, pool *pgxpool.Pool) (orderID uuid.UUID, activity int64) {
	t.Helper()
	ctx := context.Background()
	activity = time.Now().UnixNano() % 1_000_000_000_000
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock, price_cents, currency) VALUES ($1, 1, 5, 5, $2, 'CNY')`, activity, price)
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	msg := events.NewOrderCreateRequested(ids.NewRandom(), ids.NewRandom(), ids.NewRandom(), activity, 1, 42, -1, now, now+300_000, "t")
	body, _ := msg.Marshal()
	out, err := (&orderstore.Consumer{Pool: pool, Group: "g", PaymentWindow: time.Minute}).Consume(ctx, msg, body)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderCreated, out.Result)
	return out.OrderID, activity
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// The same success callback delivered 200 times at once: one payment
// record, one PAID transition, one unit from occupied to sold, one SELL
// ledger row, one ORDER_PAID event; every other delivery is ALREADY_PAID.
func TestDuplicateCallbacksPayOnce(t *testing.T) {
	pool := testenv.Database(t)
	order, activity := newOrder(t, pool)
	s := &payment.Store{Pool: pool}
	cb := success("tx-1", order)
	results := make(chan string, 200)
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Apply(context.Background(), cb)
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	got := map[string]int{}
	for r := range results {
		got[r]++
	}
	require.Equal(t, map[string]int{payment.ResultPaid: 1, payment.ResultAlreadyPaid: 199}, got)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM payment_record WHERE order_id = $1`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'PAID'`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND occupied_stock = 0 AND sold_stock = 1 AND available_stock = 4`, activity))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM inventory_ledger WHERE order_id = $1 AND entry_type = 'SELL'`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM event_outbox WHERE aggregate_id = $1 AND event_type = 'ORDER_PAID'`, order))
}

// A success for an order already cancelled is a paid-after-cancel anomaly:
// the order stays CANCELLED, the payment enters the refund flow once.
func TestPaidAfterCancelStartsTheRefund(t *testing.T) {
	pool := testenv.Database(t)
	order, _ := newOrder(t, pool)
	_, err := pool.Exec(context.Background(), `UPDATE orders SET status = 'CANCELLED', cancelled_at = now() WHERE order_id = $1`, order)
	require.NoError(t, err)
	s := &payment.Store{Pool: pool}
	cb := success("late-1", order)
	for range 3 {
		r, err := s.Apply(context.Background(), cb)
		require.NoError(t, err)
		require.Equal(t, payment.ResultPaidAfterCancel, r)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'CANCELLED'`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM payment_record WHERE order_id = $1 AND status = 'REFUNDING'`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM event_outbox WHERE aggregate_id = $1 AND event_type = 'PAYMENT_REFUND_REQUIRED'`, order))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM inventory_ledger WHERE order_id = $1 AND entry_type = 'SELL'`, order))
}

// A provider transaction reported again for another order or amount is a
// conflict: refused, nothing written.
func TestConflictingCallbackWritesNothing(t *testing.T) {
	pool := testenv.Database(t)
	order, _ := newOrder(t, pool)
	other, _ := newOrder(t, pool)
	s := &payment.Store{Pool: pool}
	_, err := s.Apply(context.Background(), success("tx-9", order))
	require.NoError(t, err)
	_, err = s.Apply(context.Background(), success("tx-9", other))
	require.ErrorIs(t, err, payment.ErrConflict)
	again := success("tx-9", order)
	again.Currency = "USD"
	_, err = s.Apply(context.Background(), again)
	require.ErrorIs(t, err, payment.ErrConflict)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM payment_record`))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'CREATED'`, other))
}

// Money: the order carries its SKU's price; a success of another amount
// (0, less, more) or another currency pays nothing — the order, the stock
// and the payments untouched — and an order never priced cannot be paid.
func TestPaymentMustMatchTheOrdersPrice(t *testing.T) {
	pool := testenv.Database(t)
	order, activity := newOrder(t, pool)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND amount_cents = $2 AND currency = 'CNY'`, order, price))
	s := &payment.Store{Pool: pool}
	for _, c := range []struct {
		name     string
		amount   int64
		currency string
	}{{"zero", 0, "CNY"}, {"one cent short", price - 1, "CNY"}, {"more", price + 1, "CNY"}, {"another currency", price, "USD"}} {
		cb := success("tx-"+c.name, order)
		cb.AmountCents, cb.Currency = c.amount, c.currency
		_, err := s.Apply(context.Background(), cb)
		require.ErrorIs(t, err, payment.ErrConflict, c.name)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'CREATED'`, order))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM payment_record WHERE order_id = $1`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND sold_stock = 0`, activity))

	_, err := pool.Exec(context.Background(), `UPDATE orders SET amount_cents = 0 WHERE order_id = $1`, order)
	require.NoError(t, err)
	cb := success("tx-unpriced", order)
	cb.AmountCents = 0
	_, err = s.Apply(context.Background(), cb)
	require.ErrorIs(t, err, payment.ErrConflict, "an order of 0 is paid by nothing")
}

func post(t *testing.T, h http.Handler, provider string, body []byte, sign func(http.Header, []byte)) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/payments/"+provider+"/callbacks", bytes.NewReader(body))
	if sign != nil {
		sign(req.Header, body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var r struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &r)
	return rec.Code, r.Code
}

// signer signs with key at now+skew.
func signer(key []byte, skew time.Duration) func(http.Header, []byte) {
	return func(h http.Header, body []byte) { payment.SignedHeaders(h, key, time.Now().Add(skew), body) }
}

// The signed endpoint: bad signatures, stale or future timestamps and
// malformed bodies are refused and write nothing; either of a provider's two
// keys verifies (rotation); a wrong amount is quarantined as evidence and
// pays nothing; an unknown order is quarantined, never created, and applied
// once the order exists; a good callback pays, and its replay within the
// window is idempotent.
func TestCallbackEndpoint(t *testing.T) {
	pool := testenv.Database(t)
	oldKey, key := []byte("provider-key-0123456789abcdef0123"), []byte("provider-key-next-456789abcdef012")
	s := &payment.Store{Pool: pool}
	mux := http.NewServeMux()
	(&payment.Handler{Store: s, Keys: map[string][][]byte{"sim": {oldKey, key}}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Routes(mux)
	order, _ := newOrder(t, pool)
	bodyOf := func(order uuid.UUID, tx string, amount int64) []byte {
		b, _ := json.Marshal(map[string]any{"transaction_id": tx, "order_id": order.String(), "amount_cents": amount,
			"currency": "CNY", "status": "SUCCESS", "paid_at_ms": time.Now().UnixMilli()})
		return b
	}
	body := func(order uuid.UUID, tx string) []byte { return bodyOf(order, tx, price) }
	good := body(order, "tx-http")
	signed := signer(key, 0)
	replaced := func(h http.Header, b []byte) { // signed at one time, sent under another
		payment.SignedHeaders(h, key, time.Now().Add(-time.Hour), b)
		h.Set(payment.TimestampHeader, strconv.FormatInt(time.Now().UnixMilli(), 10))
	}
	cases := []struct {
		name, provider string
		body           []byte
		sign           func(http.Header, []byte)
		status         int
		code           string
	}{
		{"bad signature", "sim", good, signer([]byte("someone else's key 0123456789abc"), 0), 401, "BAD_SIGNATURE"},
		{"no signature", "sim", good, nil, 401, "BAD_SIGNATURE"},
		{"signature of another time", "sim", good, replaced, 401, "BAD_SIGNATURE"},
		{"captured an hour ago", "sim", good, signer(key, -time.Hour), 401, "STALE_CALLBACK"},
		{"six minutes old", "sim", good, signer(key, -6*time.Minute), 401, "STALE_CALLBACK"},
		{"from the future", "sim", good, signer(key, 6*time.Minute), 401, "STALE_CALLBACK"},
		{"unknown provider", "nobody", good, signed, 404, "UNKNOWN_PROVIDER"},
		{"not JSON", "sim", []byte("{"), signed, 400, "INVALID_CALLBACK"},
		{"unknown field", "sim", []byte(`{"x":1}`), signed, 400, "INVALID_CALLBACK"},
		{"bad order id", "sim", []byte(`{"transaction_id":"a","order_id":"nope","amount_cents":1,"currency":"CNY","status":"SUCCESS","paid_at_ms":1}`), signed, 400, "INVALID_CALLBACK"},
		{"amount 0", "sim", bodyOf(order, "tx-0", 0), signed, 400, "INVALID_CALLBACK"},
		{"no currency", "sim", []byte(`{"transaction_id":"a","order_id":"` + order.String() + `","amount_cents":2500,"status":"SUCCESS","paid_at_ms":1}`), signed, 400, "INVALID_CALLBACK"},
		{"oversized", "sim", bytes.Repeat([]byte("x"), payment.MaxCallbackBytes+1), nil, 400, "INVALID_CALLBACK"},
	}
	for _, c := range cases {
		st, code := post(t, mux, c.provider, c.body, c.sign)
		require.Equal(t, []any{c.status, c.code}, []any{st, code}, c.name)
	}
	require.Zero(t, count(t, pool, `SELECT count(*) FROM payment_record`), "refusals write nothing")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM message_quarantine`))

	// A signed success of the wrong amount: evidence kept, the order untouched.
	cheap := bodyOf(order, "tx-cheap", 1)
	st, code := post(t, mux, "sim", cheap, signed)
	require.Equal(t, []any{409, "CONFLICT"}, []any{st, code})
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM message_quarantine WHERE broker_message_id = 'tx-cheap' AND reason_code = 'CONFLICT' AND payload = $1`, cheap))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'CREATED'`, order))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM payment_record`))

	st, code = post(t, mux, "sim", good, signer(oldKey, -4*time.Minute)) // the old key, four minutes late
	require.Equal(t, []any{200, payment.ResultPaid}, []any{st, code})
	st, code = post(t, mux, "sim", good, signed)
	require.Equal(t, []any{200, payment.ResultAlreadyPaid}, []any{st, code})

	// A callback that overtakes its order: kept, not created, applied later.
	early := ids.NewRandom()
	eb := body(early, "tx-early")
	st, code = post(t, mux, "sim", eb, signed)
	require.Equal(t, []any{202, "QUARANTINED"}, []any{st, code})
	require.Zero(t, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1`, early), "never created from a callback")
	n, err := s.RetryQuarantined(context.Background(), 10)
	require.NoError(t, err)
	require.Zero(t, n, "still unknown: stays quarantined")

	later, _ := newOrder(t, pool)
	lb := body(later, "tx-later")
	_, err = pool.Exec(context.Background(), `INSERT INTO message_quarantine (quarantine_id, consumer_group, topic, broker_message_id, reason_code, detail, payload, payload_hash)
		VALUES ($1, 'payment-callback', 'sim', 'tx-later', 'UNKNOWN_ORDER', 'arrived before its order', $2, sha256($2))`, ids.NewRandom(), lb)
	require.NoError(t, err)
	n, err = s.RetryQuarantined(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'PAID'`, later))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM message_quarantine WHERE broker_message_id = 'tx-later' AND status = 'REPLAYED'`))
}

// A paid-after-cancel payment is refunded at the channel once and recorded
// as REFUNDED; asking again changes nothing.
func TestRefundOfPaidAfterCancel(t *testing.T) {
	ctx := context.Background()
	pool := testenv.Database(t)
	order, _ := newOrder(t, pool)
	_, err := pool.Exec(ctx, `UPDATE orders SET status = 'CANCELLED', cancelled_at = now() WHERE order_id = $1`, order)
	require.NoError(t, err)
	s := &payment.Store{Pool: pool}
	sim := &provider.Sim{ProviderName: "sim"}
	p, err := sim.Pay(ctx, order, price, "CNY")
	require.NoError(t, err)
	paid := payment.Callback{Provider: "sim", TransactionID: p.TransactionID, OrderID: order, AmountCents: p.AmountCents, Currency: p.Currency, PaidAt: p.At}
	r, err := s.Apply(ctx, paid)
	require.NoError(t, err)
	require.Equal(t, payment.ResultPaidAfterCancel, r)
	for i, want := range []int{1, 0} {
		n, err := s.Refund(ctx, sim, 10)
		require.NoError(t, err)
		require.Equal(t, want, n, "round %d", i)
	}
	require.True(t, sim.Refunded(p.TransactionID))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM payment_record WHERE order_id = $1 AND status = 'REFUNDED'`, order))
	// A replayed callback now answers the refund state.
	r, err = s.Apply(ctx, paid)
	require.NoError(t, err)
	require.Equal(t, payment.ResultPaidAfterCancel, r)
}

// Past the handler's rate a callback is answered 429 RETRY unread: the
// provider sends it again, nothing is written.
func TestCallbacksOverTheRateAreRetried(t *testing.T) {
	pool := testenv.Database(t)
	key := []byte("provider-key-0123456789abcdef0123")
	mux := http.NewServeMux()
	(&payment.Handler{Store: &payment.Store{Pool: pool}, Keys: map[string][][]byte{"sim": {key}}, Limiter: rate.NewLimiter(rate.Every(time.Hour), 1),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Routes(mux)
	order, _ := newOrder(t, pool)
	b, _ := json.Marshal(map[string]any{"transaction_id": "tx-rate", "order_id": order.String(), "amount_cents": price,
		"currency": "CNY", "status": "SUCCESS", "paid_at_ms": time.Now().UnixMilli()})
	st, code := post(t, mux, "sim", b, signer(key, 0))
	require.Equal(t, []any{200, payment.ResultPaid}, []any{st, code})
	st, code = post(t, mux, "sim", b, signer(key, 0))
	require.Equal(t, []any{429, "RETRY"}, []any{st, code})
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM payment_record WHERE order_id = $1`, order))
}

// design.md#failpoints after_payment_record_insert: a crash inside the payment
// transaction, the payment row written, leaves nothing; the provider's
// redelivered callback then pays the order once.
func TestCrashAfterPaymentRecordInsert(t *testing.T) {
	pool := testenv.Database(t)
	order, activity := newOrder(t, pool)
	crashing := &payment.Store{Pool: pool, Failpoint: func(name string) error {
		if name == "after_payment_record_insert" {
			return errors.New("crash at " + name)
		}
		return nil
	}}
	cb := success("tx-crash", order)
	_, err := crashing.Apply(context.Background(), cb)
	require.Error(t, err)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM payment_record WHERE order_id = $1`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM orders WHERE order_id = $1 AND status = 'CREATED'`, order))
	for i, want := range []string{payment.ResultPaid, payment.ResultAlreadyPaid} {
		r, err := (&payment.Store{Pool: pool}).Apply(context.Background(), cb)
		require.NoError(t, err)
		require.Equal(t, want, r, "delivery %d", i)
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM inventory_ledger WHERE order_id = $1 AND entry_type = 'SELL'`, order))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND sold_stock = 1 AND occupied_stock = 0`, activity))
}
