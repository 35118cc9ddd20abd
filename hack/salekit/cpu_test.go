package salekit

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A started workload's CPU is read by its name, the servers' by their
// command, and a difference of two readings is what each used between.
func TestReadCPU(t *testing.T) {
	var p Processes
	spin := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 5")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmds, p.names = append(p.cmds, spin), append(p.names, "spinner")
	t.Cleanup(func() { _ = spin.Process.Kill(); _ = spin.Wait() })
	before, err := p.ReadCPU()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	after, err := p.ReadCPU()
	if err != nil {
		t.Fatal(err)
	}
	used := after.Sub(before)
	if used["spinner"] <= 0 {
		t.Fatalf("the spinning workload used no CPU: %v", used)
	}
	if after.Total() < after["spinner"] {
		t.Fatalf("the total is less than a part: %v", after)
	}
	if g, err := serverGroup(os.Getpid()); err != nil || g != "" {
		t.Fatalf("a test binary is no server: %q, %v", g, err)
	}
}
