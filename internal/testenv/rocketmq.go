package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// serverPorts finds n consecutive free ports outside the kernel's ephemeral
// range (32768 and up), from 21000 to 24999 (below the stack's own ports).
// A server that restarts on its ports must not find one of them taken by an
// outgoing connection's source port: the broker's HA port once was, during a
// test making thousands of HTTP requests, and its restart failed to bind.
func serverPorts(t testing.TB, n int) int {
	t.Helper()
	for range 200 {
		p := 21000 + rand.IntN(4000-n)
		ok := true
		for q := p; q < p+n && ok; q++ {
			l, err := net.Listen("tcp", ":"+strconv.Itoa(q))
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
	t.Fatalf("no %d free ports in 21000-24999", n)
	return 0
}

// OwnRocketMQ starts the servers and creates the topics (name → NORMAL,
// DELAY, FIFO or TRANSACTION) and consumer groups (name → retry limit);
// they are stopped when the test ends.
func OwnRocketMQ(t testing.TB, topics map[string]string, groups map[string]int) *RocketMQ {
	t.Helper()
	NeedsStack(t)
	run := t.TempDir()
	// p: name server, p+1 gRPC, p+2 remoting, p+3 fast channel (broker-2),
	// p+5 broker, p+6 HA (broker+1).
	p := serverPorts(t, 7)
	grpc := p + 1
	r := &RocketMQ{Endpoint: "127.0.0.1:" + strconv.Itoa(grpc), run: run}
	r.env = append(os.Environ(), "RMQ_RUN_DIR="+run,
		"RMQ_NAMESRV_PORT="+strconv.Itoa(p), "RMQ_BROKER_PORT="+strconv.Itoa(p+5),
		"RMQ_GRPC_PORT="+strconv.Itoa(grpc), "RMQ_REMOTING_PORT="+strconv.Itoa(p+2))
	t.Cleanup(func() { _ = r.rmq("stop") })
	if err := r.rmq("start"); err != nil {
		t.Fatalf("starting a RocketMQ of the test's own: %v", err)
	}
	// The stack's own path: one spec, batch calls, read back from the broker.
	var spec strings.Builder
	for name, kind := range topics {
		fmt.Fprintf(&spec, "topic %s %s\n", name, kind)
	}
	for name, retries := range groups {
		fmt.Fprintf(&spec, "group %s %d\n", name, retries)
	}
	file := filepath.Join(run, "resources.txt")
	if err := os.WriteFile(file, []byte(spec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.rmq("ensure", file); err != nil {
		t.Fatalf("creating topics and groups: %v", err)
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

// StopNameServer stops the name server (the broker+proxy stay).
func (r *RocketMQ) StopNameServer(t testing.TB) {
	t.Helper()
	if err := r.rmq("stop-namesrv"); err != nil {
		t.Fatal(err)
	}
}

// StartBroker starts the broker+proxy again on the same ports and store
// (and the name server, when it was stopped).
func (r *RocketMQ) StartBroker(t testing.TB) {
	t.Helper()
	if err := r.rmq("start"); err != nil {
		t.Fatal(err)
	}
}
