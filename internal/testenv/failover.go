package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/workloads/names"
)

// Failover is a Redis primary, one replica and one Sentinel of a test's
// own (the shared stack's primary serves every other test and must not be
// failed over). It can cut replication so the primary acknowledges writes
// the replica never sees, then lose the primary: Sentinel promotes the
// replica and those writes are gone — the failover loss of design.md#faults.
type Failover struct {
	Master                          string
	tls                             *tls.Config
	primary, replica, sentinel      int
	primaryCmd, replicaCmd, sentCmd *exec.Cmd
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startRedis(t testing.TB, dir string, args ...string) *exec.Cmd {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server (hack/stack.sh up installs it): %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
	})
	return cmd
}

func (f *Failover) direct(port int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DialTimeout: time.Second, TLSConfig: f.tls})
}

func (f *Failover) sentinelClient() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(f.sentinel), TLSConfig: f.tls})
}

// stackRedisTLS is the server side of TLS with the stack's Redis
// certificate (beside its CA), as the stack's own servers run: the
// arguments hack/stack.sh gives them, which it writes beside the CA.
func stackRedisTLS(t testing.TB) []string {
	t.Helper()
	dir := filepath.Dir(Get(t, names.EnvRedisCAFile))
	b, err := os.ReadFile(filepath.Join(dir, "redis-server-tls.args")) //nolint:gosec // the stack's own file
	if err != nil {
		t.Fatalf("the stack's Redis TLS settings (hack/stack.sh up writes them): %v", err)
	}
	args := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(args) == 0 || len(args)%2 != 0 {
		t.Fatalf("the stack's Redis TLS settings: want flag/value pairs, got %q", args)
	}
	return args
}

func until(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RedisFailover starts the three servers and waits until the replica is in
// sync and Sentinel knows both.
func RedisFailover(t testing.TB) *Failover {
	t.Helper()
	NeedsStack(t)
	dir := t.TempDir()
	f := &Failover{Master: "failover-" + strconv.Itoa(os.Getpid()), primary: freePort(t), replica: freePort(t), sentinel: freePort(t), tls: RedisTLS(t)}
	tlsArgs := stackRedisTLS(t)
	common := append([]string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no", "--port", "0"}, tlsArgs...)
	f.primaryCmd = startRedis(t, filepath.Join(dir, "primary"), append([]string{"--tls-port", strconv.Itoa(f.primary)}, common...)...)
	f.replicaCmd = startRedis(t, filepath.Join(dir, "replica"), append([]string{"--tls-port", strconv.Itoa(f.replica),
		"--replicaof", "127.0.0.1", strconv.Itoa(f.primary)}, common...)...)
	ctx := context.Background()
	r := f.direct(f.replica)
	defer r.Close()
	until(t, "the replica to sync", 20*time.Second, func() bool {
		info, _ := r.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	conf := filepath.Join(dir, "sentinel", "sentinel.conf")
	_ = os.MkdirAll(filepath.Dir(conf), 0o755)
	body := fmt.Sprintf("port 0\ntls-port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %[3]s 1000\nsentinel failover-timeout %[3]s 10000\n",
		f.sentinel, filepath.Dir(conf), f.Master, f.primary)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	f.sentCmd = startRedis(t, filepath.Dir(conf), append([]string{conf, "--sentinel"}, tlsArgs...)...)
	s := f.sentinelClient()
	defer s.Close()
	until(t, "Sentinel to see the replica", 30*time.Second, func() bool {
		reps, err := s.Replicas(ctx, f.Master).Result()
		return err == nil && len(reps) == 1
	})
	return f
}

// Client finds the primary through the Sentinel, like the workloads'
// sentinel mode.
func (f *Failover) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: f.Master,
		SentinelAddrs: []string{"127.0.0.1:" + strconv.Itoa(f.sentinel)}, DialTimeout: time.Second, TLSConfig: f.tls})
	ping(t, c)
	return c
}

// Replicated waits until the replica acknowledged every write so far.
func (f *Failover) Replicated(t testing.TB) {
	t.Helper()
	p := f.direct(f.primary)
	defer p.Close()
	n, err := p.Wait(context.Background(), 1, 5*time.Second).Result()
	if err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}
}

// CutReplication freezes the replica and drops its link: from now on the
// primary acknowledges writes no replica has.
func (f *Failover) CutReplication(t testing.TB) {
	t.Helper()
	if err := f.replicaCmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping the replica: %v", err)
	}
	p := f.direct(f.primary)
	defer p.Close()
	ctx := context.Background()
	if err := p.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatalf("dropping the replica link: %v", err)
	}
	until(t, "the primary to lose its replica", 10*time.Second, func() bool {
		info, _ := p.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:0")
	})
}

// LosePrimary kills the primary, lets the replica run again and waits
// until Sentinel promoted it, it accepts writes, and each of clients
// reaches it. (go-redis cannot check a pooled TLS connection's health
// before use: a client learns the primary died, and switches, only by
// commands that fail on it — what a workload sees as a few errors.)
func (f *Failover) LosePrimary(t testing.TB, clients ...redis.UniversalClient) {
	t.Helper()
	if err := f.primaryCmd.Process.Kill(); err != nil {
		t.Fatalf("killing the primary: %v", err)
	}
	_, _ = f.primaryCmd.Process.Wait()
	if err := f.replicaCmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resuming the replica: %v", err)
	}
	ctx := context.Background()
	s := f.sentinelClient()
	defer s.Close()
	want := strconv.Itoa(f.replica)
	until(t, "Sentinel to promote the replica", 60*time.Second, func() bool {
		addr, err := s.GetMasterAddrByName(ctx, f.Master).Result()
		return err == nil && len(addr) == 2 && addr[1] == want
	})
	r := f.direct(f.replica)
	defer r.Close()
	until(t, "the promoted replica to accept writes", 20*time.Second, func() bool {
		return r.Set(ctx, "failover:probe", "1", time.Minute).Err() == nil
	})
	for _, c := range clients {
		until(t, "the client to reach the promoted replica", 30*time.Second, func() bool {
			v, err := c.ConfigGet(ctx, "tls-port").Result()
			return err == nil && v["tls-port"] == want
		})
	}
}
