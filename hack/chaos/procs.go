package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// live are the processes started and not yet stopped: killed when the
// harness itself is interrupted, so that no workload outlives it.
var live sync.Map // *proc → struct{}

// killLive SIGKILLs every live process and keeps them from restarting.
func killLive() {
	live.Range(func(k, _ any) bool {
		p := k.(*proc)
		p.mu.Lock()
		p.stopping = true
		c := p.cmd
		p.mu.Unlock()
		if c != nil && c.Process != nil {
			_ = c.Process.Kill()
		}
		return true
	})
}

// proc is one workload process the harness keeps running: whenever it exits
// (at a failpoint, or killed) it is started again, as a Deployment's
// kubelet would, until the sale stops.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  io.Writer

	mu        sync.Mutex
	cmd       *exec.Cmd
	failpoint string // armed in the next start's environment
	odds      int
	stopping  bool
	exited    chan struct{}

	// crashes counts exits at the failpoint (status 137), kills the
	// SIGKILLs the harness sent, starts every start.
	crashes, kills, starts atomic.Int64
}

// arm makes every next start crash at failpoint name at one hit in odds
// ("" disarms); the running process is restarted so that it takes effect.
func (p *proc) arm(name string, odds int) error {
	p.mu.Lock()
	p.failpoint, p.odds = name, odds
	p.mu.Unlock()
	return p.kill()
}

// run starts the process and restarts it until ctx ends.
func (p *proc) run(ctx context.Context) error {
	if err := p.start(); err != nil {
		return err
	}
	live.Store(p, struct{}{})
	go func() {
		for {
			p.mu.Lock()
			c := p.cmd
			p.mu.Unlock()
			err := c.Wait()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 137 {
				p.crashes.Add(1)
			}
			p.mu.Lock()
			stopping := p.stopping
			p.mu.Unlock()
			if stopping || ctx.Err() != nil {
				close(p.exited)
				return
			}
			time.Sleep(100 * time.Millisecond) // a restart, not a hot loop
			if err := p.start(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: restarting %s: %v\n", p.name, err)
				time.Sleep(time.Second)
			}
		}
	}()
	return nil
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := exec.Command(p.bin, p.args...) //nolint:gosec // the binary the harness built
	c.Env = append(append(os.Environ(), p.env...), "SECKILL_FAILPOINTS="+p.failpoint, fmt.Sprintf("SECKILL_FAILPOINT_ODDS=%d", p.odds))
	c.Stdout, c.Stderr = p.log, p.log
	if err := c.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.cmd = c
	if p.exited == nil {
		p.exited = make(chan struct{})
	}
	p.starts.Add(1)
	return nil
}

// kill sends SIGKILL (a crash: no drain, no goodbye); run starts it again.
func (p *proc) kill() error {
	p.mu.Lock()
	c := p.cmd
	p.mu.Unlock()
	if c == nil || c.Process == nil {
		return nil
	}
	p.kills.Add(1)
	if err := c.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill -9 %s: %w", p.name, err)
	}
	return nil
}

// freeze stops the process where it is (SIGSTOP: it holds its connections
// and answers nothing) or lets it go on (SIGCONT).
func (p *proc) freeze(on bool) error {
	p.mu.Lock()
	c := p.cmd
	p.mu.Unlock()
	if c == nil || c.Process == nil {
		return nil
	}
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	if err := c.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill -%s %s: %w", sig, p.name, err)
	}
	return nil
}

// stop interrupts the process (it finishes its work in hand) and waits.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopping = true
	c, exited := p.cmd, p.exited
	p.mu.Unlock()
	if c != nil && c.Process != nil {
		_ = c.Process.Signal(syscall.SIGCONT) // a frozen one, too
		_ = c.Process.Signal(os.Interrupt)
	}
	if exited != nil {
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = c.Process.Kill()
			<-exited
		}
	}
	live.Delete(p)
}

// pick is a random element of ps.
func pick(ps []*proc) *proc { return ps[rand.IntN(len(ps))] } //nolint:gosec // chaos, not crypto
