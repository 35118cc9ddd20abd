// Package salekit holds what the local sales of hack/ share (the demo and
// bench-sale): the workloads binary built once, its processes started and
// stopped, the local stack's settings, readiness waits.
package salekit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/seckill/seckill-operator/workloads/stackenv"
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
type Processes struct{ cmds []*exec.Cmd }

// Start starts one workload writing to log.
func (p *Processes) Start(bin string, env []string, log io.Writer, args ...string) error {
	c := Cmd(bin, env, args...)
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", args[0], err)
	}
	p.cmds = append(p.cmds, c)
	return nil
}

// Stop interrupts every process (they finish their work in hand) and waits.
func (p *Processes) Stop() {
	for _, c := range p.cmds {
		_ = c.Process.Signal(os.Interrupt)
	}
	for _, c := range p.cmds {
		_ = c.Wait()
	}
	p.cmds = nil
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
