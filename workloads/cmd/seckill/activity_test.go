package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/control"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/payment"
	"github.com/seckill/seckill-operator/workloads/pgroles"
	"github.com/seckill/seckill-operator/workloads/provider"
)

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// run runs the binary and returns its stdout, stderr and exit status.
func run(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// Nothing from the caller's environment but the stack's Redis login and
	// CA (testenv puts them there, as a pod's env carries them).
	cmd.Env = []string{"PATH=/usr/bin:/bin", names.EnvRedisUsername + "=" + os.Getenv(names.EnvRedisUsername),
		names.EnvRedisPassword + "=" + os.Getenv(names.EnvRedisPassword), names.EnvRedisCAFile + "=" + os.Getenv(names.EnvRedisCAFile)}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errb.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errb.String(), 0
}

// Issue 12: provisioning and the window without Kubernetes, with the
// operator's store operations — once per generation, stock only grows —
// and a status that says what the stores hold.
func TestActivityCommands(t *testing.T) {
	bin := buildBinary(t)
	pool := testenv.Database(t)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	common := []string{"-pg-dsn", pool.Config().ConnString(), "-redis-addrs", testenv.Get(t, "SECKILL_REDIS_ADDR"),
		"-activity-id", strconv.FormatInt(activity, 10), "-skus", "1:3,2:1"}
	cmd := func(args ...string) []string { return append(args, common...) }
	status := func() control.Status {
		out, errOut, code := run(t, bin, cmd("activity", "status", "-json")...)
		require.Zero(t, code, errOut)
		var st control.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		return st
	}

	out, errOut, code := run(t, bin, cmd("activity", "provision", "-stock", "1=10,2=4", "-price", "1=1999,2=500", "-currency", "EUR")...)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "SKU 1: 10 units at 1999 EUR, generation 1: PostgreSQL APPLIED, Redis buckets APPLIED APPLIED APPLIED")
	st := status()
	require.Len(t, st.SKUs, 2)
	require.Equal(t, int64(10), st.SKUs[0].Postgres.Initial)
	require.Equal(t, int64(10), st.SKUs[0].Redis.Initial)
	var shares []int64
	for _, b := range st.SKUs[0].Buckets {
		shares = append(shares, b.Initial)
	}
	require.Equal(t, []int64{4, 3, 3}, shares)
	require.Contains(t, st.Problems, "no activity_control row: run `seckill activity window`")

	// Same generation: nothing changes, and it says so.
	out, _, code = run(t, bin, cmd("activity", "provision", "-stock", "1=12,2=4", "-price", "1=1999,2=500")...)
	require.Zero(t, code)
	require.Contains(t, out, "nothing changed: generation 1 was applied before")
	require.Equal(t, int64(10), status().SKUs[0].Postgres.Initial)
	// A later generation grows the stock once; shrinking is refused.
	_, errOut, code = run(t, bin, cmd("activity", "provision", "-stock", "1=12,2=4", "-price", "1=1999,2=500", "-generation", "2")...)
	require.Zero(t, code, errOut)
	require.Equal(t, int64(12), status().SKUs[0].Redis.Initial)
	_, errOut, code = run(t, bin, cmd("activity", "provision", "-stock", "1=5,2=4", "-price", "1=1999,2=500", "-generation", "3")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "stock may only grow")

	_, errOut, code = run(t, bin, cmd("activity", "window", "-state", "PAUSED", "-generation", "2")...)
	require.Zero(t, code, errOut)
	require.Equal(t, "PAUSED", status().Control.Window)
	_, errOut, code = run(t, bin, cmd("activity", "window", "-state", "ACTIVE", "-payment-window", "2m")...)
	require.Zero(t, code, errOut)
	st = status()
	require.Empty(t, st.Problems)
	require.Equal(t, "ACTIVE", st.Control.Window)
	require.Equal(t, 2*time.Minute, st.Control.PaymentWindow)
	require.Equal(t, int64(2), st.Control.Generation, "the recorded generation is kept")
	for _, s := range st.SKUs {
		for _, b := range s.Buckets {
			require.Equal(t, "ACTIVE", b.Window, b.Slot)
		}
	}
	// Moving the window again keeps the recorded durations: the payment
	// window is read by the consumers from here, so a pause never resets it.
	_, errOut, code = run(t, bin, cmd("activity", "window", "-state", "PAUSED")...)
	require.Zero(t, code, errOut)
	require.Equal(t, 2*time.Minute, status().Control.PaymentWindow)
	out, _, code = run(t, bin, cmd("activity", "status")...)
	require.Zero(t, code)
	require.Contains(t, out, "problems: none")
}

// Issue 27: the per-workload PostgreSQL roles for the process mode. Each
// DSN logs in as its own role with only its grants; a second run changes
// nothing (same file, same passwords); -rotate gives new passwords and the
// old DSN is refused; -drop removes the roles and the file.
func TestActivityRoles(t *testing.T) {
	bin := buildBinary(t)
	pool := testenv.Database(t)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	file := filepath.Join(t.TempDir(), "roles.env")
	common := []string{"-pg-dsn", pool.Config().ConnString(), "-activity-id", strconv.FormatInt(activity, 10), "-out", file}
	roles := func(extra ...string) pgroles.EnvFile {
		t.Helper()
		out, errOut, code := run(t, bin, append(append([]string{"activity", "roles"}, common...), extra...)...)
		require.Zero(t, code, errOut)
		if slices.Contains(extra, "-drop") {
			require.Contains(t, out, "roles dropped")
			return nil
		}
		require.Contains(t, out, "8 roles ready")
		f, err := pgroles.ReadEnvFile(file)
		require.NoError(t, err)
		require.Len(t, f, len(pgroles.Grants))
		return f
	}
	t.Cleanup(func() { run(t, bin, append([]string{"activity", "roles", "-drop"}, common...)...) })
	connect := func(dsn string) (*pgx.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return pgx.Connect(ctx, dsn)
	}

	first := roles()
	before, err := os.ReadFile(file) //nolint:gosec // the test's own file
	require.NoError(t, err)
	gw, err := connect(first[pgroles.Gateway])
	require.NoError(t, err)
	var n int
	require.NoError(t, gw.QueryRow(context.Background(), `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1`, activity).Scan(&n))
	_, err = gw.Exec(context.Background(), `SELECT count(*) FROM orders`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "the gateway may not read orders")
	require.Equal(t, "42501", pgErr.Code)
	require.NoError(t, gw.Close(context.Background()))

	require.Equal(t, first, roles(), "a second run changes nothing")
	after, err := os.ReadFile(file) //nolint:gosec // the test's own file
	require.NoError(t, err)
	require.Equal(t, before, after)

	rotated := roles("-rotate")
	require.NotEqual(t, first[pgroles.Consumer], rotated[pgroles.Consumer])
	_, err = connect(first[pgroles.Consumer])
	require.Error(t, err, "the old password is refused after -rotate")
	c, err := connect(rotated[pgroles.Consumer])
	require.NoError(t, err)
	require.NoError(t, c.Close(context.Background()))

	roles("-drop")
	_, err = os.Stat(file)
	require.True(t, os.IsNotExist(err), "the file is removed")
	_, err = connect(rotated[pgroles.Consumer])
	require.Error(t, err, "the role is gone")

	_, errOut, code := run(t, bin, "activity", "roles", "-pg-dsn", pool.Config().ConnString(), "-activity-id", "1")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "-out is required")
}

// The simulated channel as a process: a payment's success reaches the
// callback endpoint signed with the channel's key (and duplicated when
// asked); a payment after the close is refused as PAYMENT_CLOSED.
func TestProviderSimProcess(t *testing.T) {
	bin := buildBinary(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	var mu sync.Mutex
	var bodies []payment.CallbackBody
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(payment.TimestampHeader), 10, 64)
		if r.URL.Path != "/v1/payments/sim/callbacks" || r.Header.Get(payment.SignatureHeader) != payment.Sign(key, ts, body) ||
			time.Since(time.UnixMilli(ts)).Abs() > time.Minute {
			http.Error(w, "bad callback", http.StatusUnauthorized)
			return
		}
		var b payment.CallbackBody
		require.NoError(t, json.Unmarshal(body, &b))
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
	}))
	defer cb.Close()
	addr := "127.0.0.1:" + strconv.Itoa(freeTCPPort(t))
	startProcess(t, bin, "provider-sim", "-addr", addr, "-callback-url", cb.URL,
		"-payment-keys", "sim:30313233343536373839616263646566"+"30313233343536373839616263646566", "-duplicates", "1")
	c := &provider.Client{ProviderName: "sim", BaseURL: "http://" + addr}
	ctx := context.Background()
	order, closed := uuid.New(), uuid.New()
	require.Eventually(t, func() bool { _, err := c.Query(ctx, order); return err == nil }, 10*time.Second, 50*time.Millisecond)

	paid, err := c.Pay(ctx, order, 1999, "EUR")
	require.NoError(t, err)
	mu.Lock()
	require.Len(t, bodies, 2, "the success and its duplicate")
	require.Equal(t, payment.CallbackBody{TransactionID: paid.TransactionID, OrderID: order.String(), Status: "SUCCESS",
		AmountCents: 1999, Currency: "EUR", PaidAtMs: paid.At.UnixMilli()}, bodies[0])
	mu.Unlock()
	q, err := c.Query(ctx, order)
	require.NoError(t, err)
	require.Equal(t, paid.TransactionID, q.TransactionID)

	_, err = c.Close(ctx, closed)
	require.NoError(t, err)
	_, err = c.Pay(ctx, closed, 1999, "EUR")
	require.ErrorIs(t, err, provider.ErrClosed)
}
