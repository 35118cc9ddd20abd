package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/events"
	"github.com/seckill/seckill-operator/workloads/ids"
	"github.com/seckill/seckill-operator/workloads/mq"
)

// buildFailpointBinary compiles this command with the failpoints tag.
func buildFailpointBinary(t *testing.T) string { return buildBinary(t, "-tags", "failpoints") }

// buildBinary compiles this command with the given build flags.
func buildBinary(t *testing.T, flags ...string) string {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	key := strings.Join(flags, " ")
	if bin, ok := builds.bins[key]; ok {
		return bin
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "seckill-cmd-test-")
		require.NoError(t, err)
		builds.dir, builds.bins = dir, map[string]string{}
	}
	bin := filepath.Join(builds.dir, fmt.Sprintf("seckill-%d", len(builds.bins)))
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, string(out))
	builds.bins[key] = bin
	return bin
}

// builds are the binaries this test process built, one per set of build
// flags, removed when it ends (TestMain).
var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
	os.Exit(code)
}

// design.md#failpoints: the consumer process is killed at each failpoint of the order
// transaction, restarted, and the pipeline converges to one order, one inbox
// row, one ledger row — and conservation holds.
func TestConsumerCrashAtFailpointsThenRestart(t *testing.T) {
	bin := buildFailpointBinary(t)
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	producer, err := mq.NewProducer(endpoint, "seckill-test-crash-create")
	require.NoError(t, err)
	defer producer.Close()

	for _, fp := range []string{"after_inbox_insert", "after_order_insert", "after_pg_stock_decrement", "after_pg_commit_before_ack"} {
		t.Run(fp, func(t *testing.T) {
			pool := testenv.Database(t)
			ctx := context.Background()
			activity := time.Now().UnixNano() % 1_000_000_000_000
			_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES ($1, 1, 3, 3)`, activity)
			require.NoError(t, err)
			args := []string{"consumer", "-pg-dsn", pool.Config().ConnString(), "-rmq-endpoint", endpoint,
				"-group", "seckill-test-crash", "-create-topic", "seckill-test-crash-create",
				"-events-topic", "seckill-test-order-events", "-invisible", "2s", "-metrics-addr", "0"}

			// The message.
			rid := ids.NewRandom()
			now := time.Now().UnixMilli()
			msg := events.NewOrderCreateRequested(rid, ids.NewRandom(), ids.NewRandom(), activity, 1, 42, -1, now, now+300000, "t")
			body, _ := msg.Marshal()
			m := mq.Message{Topic: "seckill-test-crash-create", MessageID: msg.MessageID.String(),
				Key: rid.String(), Tag: events.TypeOrderCreateRequested, Body: body}
			_, err = producer.Send(ctx, m)
			require.NoError(t, err)

			// First run: dies at the failpoint (exit 137, like kill -9).
			// Until it does, the message is sent again every 15 s with the
			// same id, as a producer's retry would: on a loaded machine an
			// earlier subtest's killed consumer may still hold a long poll
			// that pops it for a dead client, and such a message comes back
			// only minutes later. Copies are what the inbox is for: the
			// checks below count one order, one inbox row, one ledger row.
			resent := make(chan struct{})
			resend := func() {
				tick := time.NewTicker(15 * time.Second)
				defer tick.Stop()
				for {
					select {
					case <-resent:
						return
					case <-tick.C:
						sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
						_, _ = producer.Send(sctx, m)
						cancel()
					}
				}
			}
			defer func() {
				select {
				case <-resent:
				default:
					close(resent)
				}
			}()
			crashAt(t, bin, fp, crashOpts{trigger: func() { go resend() }, explain: func() string {
				var inbox int
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM consumer_inbox WHERE message_id = $1`, msg.MessageID).Scan(&inbox); err != nil {
					return fmt.Sprintf("waited for message %s; its inbox rows could not be read: %v", msg.MessageID, err)
				}
				return fmt.Sprintf("waited for the consumer to receive message %s (sent at %s) and reach the failpoint; its inbox rows: %d",
					msg.MessageID, time.UnixMilli(now).Format(time.RFC3339Nano), inbox)
			}}, args...)
			orders := func() int {
				var n int
				require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE reservation_id = $1`, rid).Scan(&n))
				return n
			}
			if fp != "after_pg_commit_before_ack" {
				require.Zero(t, orders(), "a crash before COMMIT leaves nothing behind")
			}

			// Restart without failpoints: the redelivery converges.
			startProcess(t, bin, args...)
			// The resends go on until the order is there: a copy popped for
			// the crashed process's last long poll comes back only when the
			// broker revives it, and a producer keeps retrying until it knows.
			require.Eventually(t, func() bool { return orders() == 1 }, 90*time.Second, 200*time.Millisecond)
			close(resent)
			var inbox, ledger, conserved int
			require.NoError(t, pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM consumer_inbox WHERE message_id = $1),
				(SELECT count(*) FROM inventory_ledger WHERE reservation_id = $2),
				(SELECT count(*) FROM sku_inventory WHERE activity_id = $3 AND available_stock = 2 AND occupied_stock = 1)`,
				msg.MessageID, rid, activity).Scan(&inbox, &ledger, &conserved))
			require.Equal(t, []int{1, 1, 1}, []int{inbox, ledger, conserved})
		})
	}
}

// crashOpts: trigger, when set, runs once the process has started (e.g. a
// request); explain, when set, says what was awaited if the failpoint never fires.
// crashWait bounds the wait for a failpoint: a start-up, a first broker
// route and a long poll, on a loaded machine.
const crashWait = 120 * time.Second

type crashOpts struct {
	trigger func()
	explain func() string
}

// crashAt runs the binary with the failpoint switched on and waits until it
// dies there (exit 137, like kill -9).
func crashAt(t *testing.T, bin, fp string, o crashOpts, args ...string) {
	t.Helper()
	crashing := exec.Command(bin, args...)
	crashing.Env = append(os.Environ(), "SECKILL_FAILPOINTS="+fp)
	var stderr bytes.Buffer
	crashing.Stderr = &stderr
	crashing.WaitDelay = 5 * time.Second
	require.NoError(t, crashing.Start())
	// Wait is called once; the select below and the cleanup share its
	// result. (The cleanup used to receive from the channel the select had
	// already drained, so any failure after the crash hung the test binary
	// until go test's 30-minute timeout, hiding what failed.)
	wait := sync.OnceValue(crashing.Wait)
	done := make(chan error, 1)
	go func() { done <- wait() }()
	if o.trigger != nil {
		// A trigger that fails the test (the process never got ready) stops
		// the process and shows what it printed.
		t.Cleanup(func() {
			if t.Failed() {
				_ = crashing.Process.Kill()
				if err := wait(); err != nil {
					t.Logf("killed: %v", err)
				}
				t.Logf("%s %s (failpoint %s):\n%s", filepath.Base(bin), args[0], fp, stderr.String())
			}
		})
		o.trigger()
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "exit: %v\n%s", err, stderr.String())
		require.Equal(t, 137, ee.ExitCode(), stderr.String())
		require.Contains(t, stderr.String(), "failpoint "+fp)
	case <-time.After(crashWait):
		_ = crashing.Process.Kill()
		what := "waited for the process to reach it"
		if o.explain != nil {
			what = o.explain()
		}
		t.Fatalf("the failpoint %s never fired within %s: %s; the process printed:\n%s", fp, crashWait, what, stderr.String())
	}
}

// startProcess runs the binary (no failpoints) until the test ends.
func startProcess(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(bin, args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.WaitDelay = 5 * time.Second
	require.NoError(t, c.Start())
	t.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		if t.Failed() {
			t.Logf("%s %s:\n%s", filepath.Base(bin), args[0], stderr.String())
		}
		if args[0] == "consumer" {
			// A killed consumer's last long poll stays suspended in the
			// broker for up to its await (5 s): a message arriving then is
			// popped for the dead client and comes back only when the
			// broker revives it — once more than 2 minutes later, which
			// made the next subtest's consumer wait for it in vain. The next
			// subtest's message is sent after that poll has expired.
			time.Sleep(consumerAwait + time.Second)
		}
	})
	return c
}

// consumerAwait is the consumers' long-poll await.
const consumerAwait = mq.ReceiveAwait
