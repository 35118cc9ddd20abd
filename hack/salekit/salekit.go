// Package salekit holds what the local sales of hack/ share (the demo and
// bench-sale): the workloads binary built once, its processes started and
// stopped, the local stack's settings, readiness waits.
package salekit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill-operator/internal/stackenv"
	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/tlsca"
)

// Env is a setting of the local stack (hack/stack.sh up), or exits.
func Env(key string) string {
	v, err := stackenv.Lookup(key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return v
}

// SaleEnv is the environment of a local sale's workloads: the stack's
// PostgreSQL, Redis and broker with their logins and CAs, the activity and
// its SKUs (sku:buckets,...), fresh id keys, the token key and the
// gateway's address.
func SaleEnv(activity int64, skus, tokenKey, httpAddr string) []string {
	return []string{
		"SECKILL_PG_DSN=" + Env("SECKILL_PG_DSN"), "SECKILL_REDIS_ADDRS=" + Env("SECKILL_REDIS_ADDR"),
		"SECKILL_REDIS_USERNAME=" + Env("SECKILL_REDIS_USERNAME"), "SECKILL_REDIS_PASSWORD=" + Env("SECKILL_REDIS_PASSWORD"),
		"SECKILL_RMQ_CA_FILE=" + Env("SECKILL_RMQ_CA_FILE"), "SECKILL_REDIS_CA_FILE=" + Env("SECKILL_REDIS_CA_FILE"),
		"SECKILL_RMQ_ACCESS_KEY=" + Env("SECKILL_RMQ_ACCESS_KEY"), "SECKILL_RMQ_SECRET_KEY=" + Env("SECKILL_RMQ_SECRET_KEY"),
		"SECKILL_RMQ_ENDPOINT=" + Env("SECKILL_RMQ_ENDPOINT"), "SECKILL_ACTIVITY_ID=" + strconv.FormatInt(activity, 10),
		"SECKILL_SKUS=" + skus, "SECKILL_ID_KEYS=1:" + RandomHex(32),
		"SECKILL_ID_KEY_CURRENT=1", "SECKILL_TOKEN_KEY=" + tokenKey, "SECKILL_HTTP_ADDR=" + httpAddr,
	}
}

// RedisOptions are the stack's standalone Redis with its ACL login, over
// TLS verified against the stack's CA.
func RedisOptions() *redis.Options {
	ca, err := tlsca.ReadFile(Env(names.EnvRedisCAFile), "the stack's Redis CA")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tc, _ := tlsca.Config(ca, "the stack's Redis CA") // ReadFile parsed it
	return &redis.Options{Addr: Env("SECKILL_REDIS_ADDR"), Username: Env("SECKILL_REDIS_USERNAME"), Password: Env("SECKILL_REDIS_PASSWORD"), TLSConfig: tc}
}

// SentinelEnv points the workloads at the stack's Sentinel instead of the
// primary (their sentinel mode): appended after SaleEnv.
func SentinelEnv() []string {
	return []string{names.EnvRedisMode + "=sentinel", "SECKILL_REDIS_ADDRS=" + Env("SECKILL_REDIS_SENTINEL_ADDR"),
		names.EnvRedisMaster + "=" + Env("SECKILL_REDIS_SENTINEL_MASTER")}
}

// SentinelClient finds the stack's primary through its Sentinel, as the
// workloads' sentinel mode does, with the same login.
func SentinelClient() redis.UniversalClient {
	o := RedisOptions()
	return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: Env("SECKILL_REDIS_SENTINEL_MASTER"),
		SentinelAddrs: []string{Env("SECKILL_REDIS_SENTINEL_ADDR")}, SentinelUsername: o.Username, SentinelPassword: o.Password,
		Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig})
}

// RandomHex is n random bytes, hex-encoded (keys for a local sale).
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Build compiles the workloads binary into dir and returns its path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "seckill")
	build := exec.Command("go", "build", "-o", bin, "./workloads/cmd/seckill") //nolint:gosec // our own build
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// Cmd is the workloads binary with the sale's settings added to the
// environment.
func Cmd(bin string, env []string, args ...string) *exec.Cmd {
	c := exec.Command(bin, args...) //nolint:gosec // the binary Build made
	c.Env = append(os.Environ(), env...)
	return c
}

// Processes are workloads started for one sale.
type Processes struct {
	cmds  []*exec.Cmd
	names []string
	start []func() *exec.Cmd // how each was started, to start it again
}

// Start starts one workload writing to log.
func (p *Processes) Start(bin string, env []string, log io.Writer, args ...string) error {
	mk := func() *exec.Cmd {
		c := Cmd(bin, env, args...)
		c.Stdout, c.Stderr = log, log
		return c
	}
	c := mk()
	if err := c.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", args[0], err)
	}
	p.cmds = append(p.cmds, c)
	p.names = append(p.names, args[0])
	p.start = append(p.start, mk)
	return nil
}

// Kill9 kills the first workload started as name with SIGKILL (no drain, no
// goodbye: a crash) and returns a function that starts it again.
func (p *Processes) Kill9(name string) (restart func() error, err error) {
	for i, n := range p.names {
		if n != name {
			continue
		}
		if err := p.cmds[i].Process.Kill(); err != nil {
			return nil, fmt.Errorf("kill -9 %s: %w", name, err)
		}
		_ = p.cmds[i].Wait()
		return func() error {
			c := p.start[i]()
			if err := c.Start(); err != nil {
				return fmt.Errorf("starting %s again: %w", name, err)
			}
			p.cmds[i] = c
			return nil
		}, nil
	}
	return nil, fmt.Errorf("no %s running", name)
}

// CPU is the user+system CPU time a running process has used so far
// (/proc/PID/stat, in clock ticks of 10 ms).
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its ')' are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// Stop interrupts every process (they finish their work in hand) and waits.
func (p *Processes) Stop() {
	for _, c := range p.cmds {
		_ = c.Process.Signal(os.Interrupt)
	}
	for _, c := range p.cmds {
		_ = c.Wait()
	}
	p.cmds, p.names, p.start = nil, nil, nil
}

// WaitHTTP waits up to 10 s for url to answer 200.
func WaitHTTP(url string) error {
	for range 100 {
		if resp, err := http.Get(url); err == nil { //nolint:gosec // a local URL of ours
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready: %s", url)
}
