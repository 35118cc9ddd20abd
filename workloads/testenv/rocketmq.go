package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// RocketMQ is a name server and broker+proxy of a test's own, for faults
// the shared broker must not see (a broker restart would fail every other
// test running at the time). It runs hack/rocketmq/rmq.sh with its own run
// directory and ports, from the same cached jars as the stack.
type RocketMQ struct {
	Endpoint string // gRPC proxy, host:port
	run      string
	env      []string
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// brokerPort finds a port p with p-2 and p+1 free as well (the broker's
// fast channel and HA ports).
func brokerPort(t testing.TB) int {
	t.Helper()
	for range 50 {
		p := freePort(t)
		if p < 1026 || p > 65000 {
			continue
		}
		ok := true
		for _, q := range []int{p - 2, p + 1} {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			_ = l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free broker port range")
	return 0
}

// OwnRocketMQ starts the servers and creates the topics (name → NORMAL,
// DELAY, FIFO or TRANSACTION) and consumer groups (name → retry limit);
// they are stopped when the test ends.
func OwnRocketMQ(t testing.TB, topics map[string]string, groups map[string]int) *RocketMQ {
	t.Helper()
	run := t.TempDir()
	grpc := freePort(t)
	r := &RocketMQ{Endpoint: "127.0.0.1:" + strconv.Itoa(grpc), run: run}
	r.env = append(os.Environ(), "RMQ_RUN_DIR="+run,
		"RMQ_NAMESRV_PORT="+strconv.Itoa(freePort(t)), "RMQ_BROKER_PORT="+strconv.Itoa(brokerPort(t)),
		"RMQ_GRPC_PORT="+strconv.Itoa(grpc), "RMQ_REMOTING_PORT="+strconv.Itoa(freePort(t)))
	t.Cleanup(func() { _ = r.rmq("stop") })
	if err := r.rmq("start"); err != nil {
		t.Fatalf("starting a RocketMQ of the test's own: %v", err)
	}
	for name, kind := range topics {
		if err := r.rmq("topic", name, kind); err != nil {
			t.Fatalf("creating topic %s: %v", name, err)
		}
	}
	for name, retries := range groups {
		if err := r.rmq("group", name, strconv.Itoa(retries)); err != nil {
			t.Fatalf("creating group %s: %v", name, err)
		}
	}
	return r
}

func (r *RocketMQ) rmq(args ...string) error {
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot(), "hack", "rocketmq", "rmq.sh")}, args...)...)
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &rmqError{args: args, out: string(out), err: err}
	}
	return nil
}

type rmqError struct {
	args []string
	out  string
	err  error
}

func (e *rmqError) Error() string { return "rmq.sh " + e.args[0] + ": " + e.err.Error() + "\n" + e.out }

// StopBroker stops the broker+proxy (the name server stays), gracefully:
// what it stored is flushed and served again after StartBroker.
func (r *RocketMQ) StopBroker(t testing.TB) {
	t.Helper()
	if err := r.rmq("stop-broker"); err != nil {
		t.Fatal(err)
	}
}

// StartBroker starts the broker+proxy again on the same ports and store.
func (r *RocketMQ) StartBroker(t testing.TB) {
	t.Helper()
	if err := r.rmq("start"); err != nil {
		t.Fatal(err)
	}
}
