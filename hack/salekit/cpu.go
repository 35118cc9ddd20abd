package salekit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The servers' groups in a CPU reading.
const (
	GroupPostgres = "PostgreSQL"
	GroupRedis    = "Redis"
	GroupRocketMQ = "RocketMQ (JVMs)"
)

// CPUReading is the CPU time each group of processes has used so far: each
// workload this sale started (by name: two consumers add up), and the
// servers found in /proc (every postgres process, every redis-server, the
// RocketMQ JVMs).
type CPUReading map[string]time.Duration

// Sub is the CPU each group used between before and r.
func (r CPUReading) Sub(before CPUReading) CPUReading {
	out := CPUReading{}
	for k, v := range r {
		out[k] = v - before[k]
	}
	return out
}

// Total is the CPU of every group.
func (r CPUReading) Total() time.Duration {
	var t time.Duration
	for _, v := range r {
		t += v
	}
	return t
}

// ReadCPU reads the workloads' and the servers' CPU. A process that exits
// while it is read is left out (its time is lost to the reading, not
// counted twice).
func (p *Processes) ReadCPU() (CPUReading, error) {
	r := CPUReading{}
	for i, c := range p.cmds {
		if c.Process == nil {
			continue
		}
		d, err := CPU(c.Process.Pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r[p.names[i]] += d
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		group, err := serverGroup(pid)
		if errors.Is(err, fs.ErrNotExist) || group == "" {
			continue
		}
		if err != nil {
			return nil, err
		}
		d, err := CPU(pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r[group] += d
	}
	return r, nil
}

// serverGroup names the server group a process belongs to ("" none).
func serverGroup(pid int) (string, error) {
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")) //nolint:gosec // /proc
	if err != nil {
		return "", err
	}
	switch string(bytes.TrimSpace(comm)) {
	case "postgres":
		return GroupPostgres, nil
	case "redis-server":
		return GroupRedis, nil
	case "java":
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")) //nolint:gosec // /proc
		if err != nil {
			return "", err
		}
		if bytes.Contains(cmdline, []byte("rocketmq")) {
			return GroupRocketMQ, nil
		}
	}
	return "", nil
}

// String lists the groups' CPU seconds, for a log line.
func (r CPUReading) String() string {
	var b bytes.Buffer
	for k, v := range r {
		fmt.Fprintf(&b, "%s %.1fs; ", k, v.Seconds())
	}
	return b.String()
}
