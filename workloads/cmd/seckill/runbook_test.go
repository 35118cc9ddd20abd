package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/internal/testsale"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/redisstore"
	"github.com/seckill/seckill-operator/workloads/repair"
)

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// saleCLI is the binary pointed at a test sale: its PostgreSQL flags, its
// PostgreSQL and Redis flags, its activity id, and a runner answering the
// output and the exit code.
func saleCLI(t *testing.T, bin string, s *testsale.Sale) (pg, rd []string, act string, cmd func(args ...string) (string, int)) {
	pg = []string{"-pg-dsn", s.Pool.Config().ConnString()}
	rd = append(append([]string{}, pg...), "-redis-addrs", testenv.Get(t, "SECKILL_REDIS_ADDR"))
	return pg, rd, strconv.FormatInt(s.Activity, 10), func(args ...string) (string, int) {
		t.Helper()
		o, err := exec.Command(bin, args...).CombinedOutput()
		return string(o), exitCode(err)
	}
}

// The runbook of design.md#runbook end to end with the real binary: a rejected
// reservation's compensation task gave up (Redis timeouts) while Redis
// still holds the unit. The reconcile job exits 1 and records it for a
// person; the operator gathers the evidence (PostgreSQL, Redis, the real
// broker, the logs), freezes, lifts the freeze with an approver, closes the
// task through the standard compensation, and the invariants and the next
// reconcile run are clean. Bad input is refused with exit 2.
func TestRunbookCommand(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	s := testsale.New(t, 0, 2)
	msg, out := s.Buy(t, 42)
	require.Equal(t, "ORDER_REJECTED", out.Result)
	s.Exec(t, `UPDATE compensation_task SET status = 'MANUAL', last_result = 'REDIS_UNKNOWN', attempt_count = 10 WHERE reservation_id = $1`, msg.ReservationID)

	// The order-create message as the gateway sent it, on the real broker.
	prod, err := mq.NewProducer(testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), names.TopicOrderCreate)
	require.NoError(t, err)
	raw, _ := msg.Marshal()
	_, err = prod.Send(ctx, mq.Message{Topic: names.TopicOrderCreate, MessageID: msg.MessageID.String(), Key: msg.ReservationID.String(), Body: raw})
	require.NoError(t, err)
	require.NoError(t, prod.Close())

	pg, rd, act, cmd := saleCLI(t, bin, s)

	o, code := cmd(append([]string{"reconcile", "-activity-id", act, "-skus", "1:1", "-watermark-lag", "0s"}, rd[0:4]...)...)
	require.Equal(t, 1, code, o)
	require.Contains(t, o, "COMPENSATION_TASK_MANUAL")

	o, code = cmd(append([]string{"runbook", "list", "-activity-id", act, "-json"}, pg...)...)
	require.Equal(t, 0, code, o)
	var tasks []repair.Task
	require.NoError(t, json.Unmarshal([]byte(o), &tasks), o)
	require.Len(t, tasks, 1)
	require.Equal(t, "COMPENSATION_TASK_MANUAL", tasks[0].Rule)
	repairID := tasks[0].IDHex

	// Evidence by the request id, with the real broker and a log file.
	logFile := filepath.Join(t.TempDir(), "consumer.log")
	require.NoError(t, os.WriteFile(logFile, []byte(`{"msg":"order.transaction_committed","reservation_id":"`+msg.ReservationID.String()+`"}`+"\n"+`{"msg":"unrelated"}`+"\n"), 0o600))
	root, _ := filepath.Abs("../../..")
	t.Setenv("RMQ_RUN_DIR", filepath.Join(root, ".stack", "rocketmq"))
	var evs []map[string]any
	for attempt := 0; ; attempt++ { // the broker's key index is built asynchronously
		o, code = cmd(append([]string{"runbook", "evidence", "-id", msg.RequestID.String(), "-logs", logFile,
			"-broker-query", "bash " + filepath.Join(root, "hack", "rocketmq", "rmq.sh") + " admin", "-topics", names.TopicOrderCreate}, rd...)...)
		require.Equal(t, 0, code, o)
		require.NoError(t, json.Unmarshal([]byte(o), &evs), o)
		if strings.Contains(o, "seckill-order-create") && strings.Contains(evs[0]["broker"].([]any)[0].(map[string]any)["output"].(string), msg.ReservationID.String()) || attempt == 5 {
			break
		}
		time.Sleep(2 * time.Second)
	}
	require.Len(t, evs, 1)
	ev := evs[0]
	require.Equal(t, []any{"request"}, ev["matched_as"])
	pgEv := ev["postgres"].(map[string]any)
	require.Equal(t, "ORDER_REJECTED", pgEv["inventory_reservation"].(map[string]any)["status"])
	require.Len(t, pgEv["compensation_task"], 1)
	require.Len(t, pgEv["consumer_inbox"], 1)
	require.Len(t, pgEv["repair_task"], 1)
	require.Equal(t, "RESERVED", ev["redis"].(map[string]any)["reservation"].(map[string]any)["status"])
	require.Len(t, ev["logs"], 1)
	broker := ev["broker"].([]any)
	require.Len(t, broker, 2, "reservation id and message id looked up")
	require.Contains(t, broker[0].(map[string]any)["output"], msg.ReservationID.String(), "the broker holds the message under the reservation key")
	require.Equal(t, "payment channel / payment_record", ev["authority"].([]any)[0])

	// Bad input: refused with exit 2, nothing written.
	for _, bad := range [][]string{
		{"runbook", "freeze", "-reservation", msg.ReservationID.String(), "-operator", "alice"},                                 // no reason
		{"runbook", "freeze", "-reservation", "not-a-uuid", "-operator", "alice", "-reason", "x"},                               // bad id
		{"runbook", "unfreeze", "-reservation", msg.ReservationID.String(), "-operator", "a", "-approver", "a", "-reason", "x"}, // self-approved
		{"runbook", "resolve", "-repair-id", repairID, "-step", "delete-row", "-operator", "a", "-approver", "b", "-reason", "x"},
		{"runbook", "resolve", "-repair-id", "abc", "-step", "none", "-operator", "a", "-approver", "b", "-reason", "x"},
		{"runbook", "list", "-status", "DONE"},
		{"runbook", "explode"},
	} {
		o, code := cmd(append(bad, rd...)...)
		require.Equal(t, 2, code, "%v: %s", bad, o)
	}
	require.Equal(t, "ORDER_REJECTED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, msg.ReservationID))

	o, code = cmd(append([]string{"runbook", "freeze", "-reservation", msg.ReservationID.String(), "-operator", "alice",
		"-reason", "task gave up on Redis timeouts", "-incident", "INC-42"}, pg...)...)
	require.Equal(t, 0, code, o)
	require.Equal(t, "MANUAL_REVIEW", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, msg.ReservationID))

	// The standard compensation refuses a frozen reservation.
	resolveArgs := append([]string{"runbook", "resolve", "-repair-id", repairID, "-step", "compensate", "-operator", "alice",
		"-approver", "bob", "-reason", "Redis still holds the unit; PostgreSQL rejected it", "-incident", "INC-42"}, rd...)
	o, code = cmd(resolveArgs...)
	require.Equal(t, 1, code, o)
	require.Equal(t, int64(1), s.Counters(t).Available, "nothing restored while frozen")

	o, code = cmd(append([]string{"runbook", "unfreeze", "-reservation", msg.ReservationID.String(), "-operator", "alice",
		"-approver", "bob", "-reason", "evidence reviewed", "-incident", "INC-42"}, pg...)...)
	require.Equal(t, 0, code, o)
	o, code = cmd(resolveArgs...)
	require.Equal(t, 0, code, o)
	var closed repair.Task
	require.NoError(t, json.Unmarshal([]byte(o), &closed), o)
	require.Equal(t, repair.Applied, closed.Status)
	require.Equal(t, "bob", closed.Approver)
	require.Equal(t, "INC-42", closed.Incident)
	require.Contains(t, closed.Via, "compensation_task")
	require.Equal(t, "COMPENSATED", s.One(t, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, msg.ReservationID))
	require.Equal(t, "COMPENSATED", s.RedisStatus(t, msg.ReservationID))
	require.Equal(t, int64(2), s.Counters(t).Available, "the unit is back, once")

	o, code = cmd(append([]string{"runbook", "verify", "-activity-id", act, "-skus", "1:1"}, rd...)...)
	require.Equal(t, 0, code, o)
	o, code = cmd(append([]string{"reconcile", "-activity-id", act, "-skus", "1:1", "-watermark-lag", "0s"}, rd...)...)
	require.Equal(t, 0, code, o)
	require.Contains(t, o, ": CLEAN")

	// verify fails on a broken invariant.
	s.Exec(t, `UPDATE sku_inventory SET sold_stock = 1, initial_stock = 1 WHERE activity_id = $1`, s.Activity)
	o, code = cmd(append([]string{"runbook", "verify", "-activity-id", act, "-skus", "1:1"}, rd...)...)
	require.Equal(t, 1, code, o)
	require.Contains(t, o, "orders agree with the stock")
}

// The activity-level recount through the binary: Redis lost a committed
// unit's writes; reconcile records a REDIS_RECOUNT task for a person, the
// runbook applies it (it needs the SKU's buckets), the next run is clean.
func TestRunbookRecountCommand(t *testing.T) {
	bin := buildBinary(t)
	ctx := context.Background()
	s := testsale.New(t, 5, 5)
	for u := int64(1); u <= 2; u++ {
		m, out := s.Buy(t, u)
		s.Project(t, m, out.OrderID)
	}
	c := s.Redis.Client()
	require.NoError(t, c.HIncrBy(ctx, s.Slot.Counter(), "committed", -1).Err())
	require.NoError(t, c.IncrBy(ctx, s.Slot.Stock(), 1).Err())

	pg, rd, act, cmd := saleCLI(t, bin, s)
	o, code := cmd(append([]string{"reconcile", "-activity-id", act, "-skus", "1:1", "-watermark-lag", "0s"}, rd...)...)
	require.Equal(t, 1, code, o)
	require.Contains(t, o, "CROSS_SYSTEM_DELTA")
	o, code = cmd(append([]string{"runbook", "list", "-activity-id", act, "-json"}, pg...)...)
	require.Equal(t, 0, code, o)
	var tasks []repair.Task
	require.NoError(t, json.Unmarshal([]byte(o), &tasks), o)
	require.Len(t, tasks, 1)
	require.Equal(t, repair.RuleRecount, tasks[0].Rule)

	resolveArgs := []string{"runbook", "resolve", "-repair-id", tasks[0].IDHex, "-step", "recount", "-operator", "alice",
		"-approver", "bob", "-reason", "Redis lost a committed unit", "-activity-id", act}
	o, code = cmd(append(resolveArgs, rd...)...)
	require.Equal(t, 2, code, "no -skus: %s", o)
	o, code = cmd(append(append(resolveArgs, "-skus", "9:1"), rd...)...)
	require.Equal(t, 2, code, "-skus without the task's SKU: %s", o)
	require.Equal(t, int64(1), s.Counters(t).Committed, "nothing changed")
	o, code = cmd(append(append(resolveArgs, "-skus", "1:1"), rd...)...)
	require.Equal(t, 0, code, o)
	require.Contains(t, o, `"applied_via": "recount.lua"`)
	require.Equal(t, redisstore.Counters{Initial: 5, Available: 3, Committed: 2, Exists: true}, s.Counters(t))

	o, code = cmd(append([]string{"reconcile", "-activity-id", act, "-skus", "1:1", "-watermark-lag", "0s"}, rd...)...)
	require.Equal(t, 0, code, o)
	require.Contains(t, o, ": CLEAN")
}
