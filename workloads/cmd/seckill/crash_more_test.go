package main_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/orderstore"
	"github.com/seckill/seckill-operator/workloads/redisstore"
)

const crashTopic = "seckill-test-crash-create"

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func postReservation(addr string, activity int64, user int64, requestID string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s/v1/activities/%d/skus/1/reservations", addr, activity),
		strings.NewReader(`{"request_id":"`+requestID+`"}`))
	req.Header.Set("X-User-ID", strconv.FormatInt(user, 10))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 90*time.Second, 100*time.Millisecond, "the process serves /readyz (its first broker route can be slow on a loaded machine)")
}

// design.md#failpoints after_redis_reserve and after_mq_send_before_redis_mark: the
// gateway process dies after the reserve Lua (nothing sent) or after the
// broker accepted the message but before send_due was acked. A send-scanner
// process resends with the same message id, the consumer process turns it
// (and any duplicate) into one order, and the restarted gateway answers the
// client's retry with the same reservation.
func TestGatewayCrashThenScannerResends(t *testing.T) {
	bin := buildFailpointBinary(t)
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	for _, fp := range []string{"after_redis_reserve", "after_mq_send_before_redis_mark"} {
		t.Run(fp, func(t *testing.T) {
			ctx := context.Background()
			pool := testenv.Database(t)
			rdb := testenv.RedisSingle(t)
			rs := redisstore.New(rdb)
			require.NoError(t, redisstore.LoadScripts(ctx, rdb))
			activity := time.Now().UnixNano() % 1_000_000_000_000
			_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, 1, 5, 5)`, activity)
			require.NoError(t, err)
			sl := redisstore.SKUSlot(activity, 1)
			_, _, err = rs.Provision(ctx, sl, 5, 1)
			require.NoError(t, err)
			require.NoError(t, rs.SetWindow(ctx, sl, redisstore.WindowActive))

			common := []string{"-pg-dsn", pool.Config().ConnString(), "-redis-addrs", testenv.Get(t, "SECKILL_REDIS_ADDR"),
				"-rmq-endpoint", endpoint, "-activity-id", strconv.FormatInt(activity, 10), "-skus", "1:1",
				"-id-keys", "1:" + strings.Repeat("ab", 32), "-id-key-current", "1"}
			addr := freeAddr(t)
			gw := append([]string{"gateway"}, common...)
			gw = append(gw, "-addr", addr, "-insecure-dev-users", "-create-topic", crashTopic)
			requestID := ids.NewRandom().String()

			// The gateway dies after the reserve Lua, before answering; or
			// after the broker took the message, in the send worker (the
			// answer, QUEUED, may have gone out first: the send follows it).
			crashAt(t, bin, fp, crashOpts{trigger: func() {
				waitReady(t, addr)
				code, body, err := postReservation(addr, activity, 77, requestID)
				if fp == "after_redis_reserve" {
					require.Error(t, err, "the process died before answering; got %d %s", code, body)
				} else if err == nil {
					require.Equal(t, http.StatusAccepted, code, body)
					require.Contains(t, body, `"QUEUED"`)
				}
			}}, gw...)
			due, err := rdb.ZRange(ctx, sl.SendDue(), 0, -1).Result()
			require.NoError(t, err)
			require.Len(t, due, 1, "the reservation waits for its send")
			rid := uuid.MustParse(due[0])
			h, err := rs.Reservation(ctx, sl, rid)
			require.NoError(t, err)
			require.Equal(t, "RESERVED", h["status"])

			// Scanner and consumer as processes: the order appears once.
			startProcess(t, bin, append(append([]string{"scanner"}, common...), "-create-topic", crashTopic, "-metrics-addr", "0")...)
			startProcess(t, bin, append(append([]string{"consumer"}, common...), "-group", "seckill-test-crash", "-create-topic", crashTopic,
				"-events-topic", "seckill-test-order-events", "-invisible", "2s", "-metrics-addr", "0")...)
			count := func(sql string, args ...any) int {
				var n int
				require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n))
				return n
			}
			require.Eventually(t, func() bool {
				return count(`SELECT count(*) FROM orders WHERE reservation_id = $1`, rid) == 1
			}, 90*time.Second, 200*time.Millisecond)
			// The scanner acks the send: PUBLISHED, the entry kept only to
			// verify the delivery (due after -resend-after; no projector
			// runs here to remove it).
			require.Eventually(t, func() bool {
				h, err := rs.Reservation(ctx, sl, rid)
				if err != nil || h["mq_state"] != redisstore.MQPublished {
					return false
				}
				score, err := rdb.ZScore(ctx, sl.SendDue(), rid.String()).Result()
				return err == nil && time.UnixMilli(int64(score)).After(time.Now().Add(time.Minute))
			}, 30*time.Second, 200*time.Millisecond, "the scanner acks the send")
			require.Equal(t, 1, count(`SELECT count(*) FROM consumer_inbox WHERE reservation_id = $1`, rid))
			require.Equal(t, 1, count(`SELECT count(*) FROM sku_inventory WHERE activity_id = $1 AND available_stock = 4 AND occupied_stock = 1`, activity))

			// The client retries against the restarted gateway: same reservation.
			startProcess(t, bin, gw...)
			waitReady(t, addr)
			code, body, err := postReservation(addr, activity, 77, requestID)
			require.NoError(t, err)
			require.Equal(t, http.StatusAccepted, code, body)
			require.Contains(t, body, rid.String())
			require.Contains(t, body, `"QUEUED"`)
		})
	}
}

// design.md#failpoints after_compensation_lua: the compensator process dies after the
// Lua restored the Redis stock and before PostgreSQL recorded it. The
// restarted compensator's Lua answers ALREADY_COMPENSATED and completes
// PostgreSQL; the stock came back exactly once.
func TestCompensatorCrashAfterLuaThenRestart(t *testing.T) {
	bin := buildFailpointBinary(t)
	ctx := context.Background()
	pool := testenv.Database(t)
	rdb := testenv.RedisSingle(t)
	rs := redisstore.New(rdb)
	require.NoError(t, redisstore.LoadScripts(ctx, rdb))
	activity := time.Now().UnixNano() % 1_000_000_000_000
	// PostgreSQL has none left, Redis one: the reservation is rejected.
	_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, 1, 0, 0)`, activity)
	require.NoError(t, err)
	sl := redisstore.SKUSlot(activity, 1)
	_, _, err = rs.Provision(ctx, sl, 1, 1)
	require.NoError(t, err)
	require.NoError(t, rs.SetWindow(ctx, sl, redisstore.WindowActive))
	ring, err := ids.NewKeyring(1, map[byte][]byte{1: []byte("crash-test-key-0123456789abcdef!!")})
	require.NoError(t, err)
	req := ids.NewRandom()
	rid := ring.ReservationID(ids.ReservationKey{ActivityID: activity, SKUID: 1, UserID: 9, RequestID: req})
	mid, _ := ring.MessageID(rid, 1)
	now := time.UnixMilli(time.Now().UnixMilli())
	res, err := rs.Reserve(ctx, redisstore.ReserveRequest{Slot: sl, ReservationID: rid, MessageID: mid, RequestID: req, UserID: 9,
		Now: now, BusinessDeadline: now.Add(5 * time.Minute), SendDue: now.Add(time.Hour), RequestTTL: time.Minute,
		SchemaVersion: 1, KeyVersion: 1, TraceID: "t"})
	require.NoError(t, err)
	require.Equal(t, int64(redisstore.ReserveOK), res.Code)
	msg := events.NewOrderCreateRequested(rid, mid, req, activity, 1, 9, -1, now.UnixMilli(), now.Add(5*time.Minute).UnixMilli(), "t")
	body, _ := msg.Marshal()
	out, err := (&orderstore.Consumer{Pool: pool, Group: "seckill-test-crash", PaymentWindow: time.Minute}).Consume(ctx, msg, body)
	require.NoError(t, err)
	require.Equal(t, orderstore.ResultOrderRejected, out.Result)
	stock := func() int {
		n, err := rdb.Get(ctx, sl.Stock()).Int()
		require.NoError(t, err)
		return n
	}
	require.Zero(t, stock())

	args := []string{"compensator", "-pg-dsn", pool.Config().ConnString(), "-redis-addrs", testenv.Get(t, "SECKILL_REDIS_ADDR"),
		"-activity-id", strconv.FormatInt(activity, 10), "-lease", "2s", "-metrics-addr", "0"}
	crashAt(t, bin, "after_compensation_lua", crashOpts{}, args...)
	require.Equal(t, 1, stock(), "the Lua ran before the crash")
	var task, reservation string
	state := func() {
		require.NoError(t, pool.QueryRow(ctx, `SELECT t.status, r.status FROM compensation_task t JOIN inventory_reservation r USING (reservation_id)
			WHERE t.reservation_id = $1`, rid).Scan(&task, &reservation))
	}
	state()
	require.NotEqual(t, "APPLIED", task, "PostgreSQL did not record it yet")

	maddr := freeAddr(t)
	startProcess(t, bin, append(args[:len(args)-1], maddr)...) // -metrics-addr <maddr>
	require.Eventually(t, func() bool { state(); return task == "APPLIED" }, 60*time.Second, 200*time.Millisecond)
	require.Equal(t, "COMPENSATED", reservation)
	require.Equal(t, 1, stock(), "restored exactly once")

	// The design.md#metrics figures on the worker's /metrics, prefixed and
	// labelled with the activity.
	resp, err := http.Get("http://" + maddr + "/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	a := fmt.Sprintf(`activity="%d"`, activity)
	for _, line := range []string{"seckill_compensation_already_applied_total{" + a + "} 1",
		"seckill_compensation_total{" + a + `,result="APPLIED"} 1`, "seckill_compensation_pending{" + a + "} 0"} {
		require.Contains(t, string(b), line+"\n")
	}
}
