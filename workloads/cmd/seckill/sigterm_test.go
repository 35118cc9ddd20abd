package main_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
)

// Every workload stops cleanly on SIGTERM (what the kubelet sends first):
// it answers its probes, is told to stop, and exits 0 well within the pod's
// 30 s grace period — never killed by the SIGKILL that follows.
func TestWorkloadsStopOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	pool := testenv.Database(t)
	activity := time.Now().UnixNano() % 1_000_000_000_000
	env := []string{
		"SECKILL_PG_DSN=" + pool.Config().ConnString(), "SECKILL_REDIS_ADDRS=" + testenv.Get(t, "SECKILL_REDIS_ADDR"),
		"SECKILL_RMQ_ENDPOINT=" + testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), "SECKILL_ACTIVITY_ID=" + strconv.FormatInt(activity, 10),
		"SECKILL_SKUS=1:2", "SECKILL_ID_KEYS=1:" + strings.Repeat("ab", 32), "SECKILL_TOKEN_KEY=" + strings.Repeat("k", 32),
		"SECKILL_PAYMENT_KEYS=sim:" + strings.Repeat("cd", 32),
	}
	workloads := []struct {
		name string
		args []string
	}{
		{"gateway", nil}, {"payments", nil}, {"provider-sim", nil},
		// Groups of this test's own (hack/rocketmq/resources.txt): a consumer
		// of another test's group would take that test's messages with it.
		{"consumer", []string{"-group", "seckill-test-sigterm", "-create-topic", "seckill-test-normal", "-events-topic", "seckill-test-normal"}},
		{"projector", []string{"-group", "seckill-test-sigterm-projector", "-events-topic", "seckill-test-normal"}},
		{"relay", []string{"-events-topic", "seckill-test-normal"}},
		{"compensator", nil},
		{"scanner", []string{"-create-topic", "seckill-test-normal"}},
		{"canceller", []string{"-group", "seckill-test-sigterm-canceller", "-cancel-topic", "seckill-test-delay", "-events-topic", "seckill-test-normal", "-provider-url", "http://127.0.0.1:1"}},
	}
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
			args := append([]string{w.name}, w.args...)
			switch w.name {
			case "gateway", "payments", "provider-sim":
				args = append(args, "-addr", addr)
			default:
				args = append(args, "-metrics-addr", addr)
			}
			logFile := filepath.Join(t.TempDir(), w.name+".log")
			f, err := os.Create(logFile)
			require.NoError(t, err)
			defer f.Close()
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdout, cmd.Stderr = f, f
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				if t.Failed() {
					b, _ := os.ReadFile(logFile)
					t.Logf("%s log:\n%s", w.name, b)
				}
			})
			require.Eventually(t, func() bool {
				resp, err := http.Get("http://" + addr + "/healthz")
				if err != nil {
					return false
				}
				_ = resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 60*time.Second, 100*time.Millisecond, "%s answers its probe", w.name)

			sent := time.Now()
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			select {
			case err := <-done:
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					t.Fatalf("%s exited with %d after SIGTERM", w.name, ee.ExitCode())
				}
				require.NoError(t, err)
				t.Logf("%s stopped %s after SIGTERM", w.name, time.Since(sent).Round(time.Millisecond))
				require.Less(t, time.Since(sent), 20*time.Second)
			case <-time.After(25 * time.Second):
				t.Fatalf("%s still running 25 s after SIGTERM", w.name)
			}
		})
	}
}

// The gateway drains on SIGTERM: with -drain-delay (the operator sets 5 s)
// it fails readiness at once, so the Service stops routing to it, keeps
// answering requests for the delay, then closes its listener and exits 0.
func TestGatewayDrainsOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	pool := testenv.Database(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	cmd := exec.Command(bin, "gateway", "-addr", addr, "-drain-delay", "2s")
	cmd.Env = append(os.Environ(),
		"SECKILL_PG_DSN="+pool.Config().ConnString(), "SECKILL_REDIS_ADDRS="+testenv.Get(t, "SECKILL_REDIS_ADDR"),
		"SECKILL_RMQ_ENDPOINT="+testenv.Get(t, "SECKILL_RMQ_ENDPOINT"), "SECKILL_ACTIVITY_ID=77", "SECKILL_SKUS=1:2",
		"SECKILL_ID_KEYS=1:"+strings.Repeat("ab", 32), "SECKILL_TOKEN_KEY="+strings.Repeat("k", 32))
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	status := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return status("/readyz") == http.StatusOK }, 60*time.Second, 100*time.Millisecond, "ready")

	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return status("/readyz") == http.StatusServiceUnavailable }, time.Second, 20*time.Millisecond,
		"readiness fails at once")
	require.Equal(t, http.StatusOK, status("/healthz"), "still serving while it drains")
	require.Equal(t, http.StatusOK, status("/openapi.yaml"), "still serving while it drains")
	select {
	case err := <-done:
		require.NoError(t, err)
		took := time.Since(sent)
		require.GreaterOrEqual(t, took, 2*time.Second, "served for the drain delay")
		require.Less(t, took, 15*time.Second)
		t.Logf("drained and stopped %s after SIGTERM", took.Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20 s after SIGTERM")
	}
	require.Zero(t, status("/healthz"), "the listener is closed")
}
