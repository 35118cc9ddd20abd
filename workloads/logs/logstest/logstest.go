// Package logstest captures what a test's workers log (package logs: JSON
// lines) and reads it back.
package logstest

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/seckill/seckill-operator/workloads/logs"
)

// Capture is a log destination written from many goroutines.
type Capture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// String is everything written so far.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Lines parses every line written so far; a line that is not one JSON
// object fails t.
func (c *Capture) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(c.String())), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var l map[string]any
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("a log line that is not JSON: %v\n%s", err, line)
		}
		out = append(out, l)
	}
	return out
}

// Events counts the §12.1 events among lines.
func Events(lines []map[string]any) map[string]int {
	seen := map[string]int{}
	for _, l := range lines {
		if e, ok := l[logs.Event].(string); ok {
			seen[e]++
		}
	}
	return seen
}
