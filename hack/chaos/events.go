package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/seckill/seckill-operator/workloads/logs"
)

// byFault are the events of §12.1 that only some faults produce, and not on
// every run: a Redis reservation lost before its compensation, the
// reconcile job finding (and giving a person) something, a payment meeting
// its timeout cancel, a relay's send failing (only when the broker stops
// while the relay holds events to send: 579, 73 and 0 in three full runs).
// The others happen in every full run of the matrix (the once-per-message
// ones at debug, which the chaos workloads log).
var byFault = map[string]bool{
	logs.EventCompensationRedisMissing: true, logs.EventReconcileAnomaly: true,
	logs.EventReconcileRepairCreated: true, logs.EventPaymentCancelRace: true,
	logs.EventOutboxSendUnknown: true,
}

// eventsSeen parses the JSON lines of the run's scenario logs (lines that
// are not JSON, e.g. the harness's own, are skipped) and counts each event
// of §12.1 and the scenarios it was seen in.
func eventsSeen(dir string, scenarios []string) (map[string]int, map[string][]string, error) {
	counts, where := map[string]int{}, map[string][]string{}
	for _, name := range scenarios {
		f, err := os.Open(filepath.Join(dir, name+".log")) //nolint:gosec // our log directory
		if errors.Is(err, fs.ErrNotExist) {
			continue // the scenario failed before its sale opened (reported as such)
		}
		if err != nil {
			return nil, nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		inThis := map[string]bool{}
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.Contains(line, []byte(`"event":`)) {
				continue
			}
			var l struct {
				Event string `json:"event"`
			}
			if json.Unmarshal(line, &l) != nil || l.Event == "" {
				continue
			}
			counts[l.Event]++
			if !inThis[l.Event] {
				inThis[l.Event] = true
				where[l.Event] = append(where[l.Event], name)
			}
		}
		err = sc.Err()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s.log: %w", name, err)
		}
	}
	return counts, where, nil
}

// eventReport is the table of §12.1's events in a run, and the ones a full
// run must show but did not.
func eventReport(counts map[string]int, where map[string][]string) (string, []string) {
	var b strings.Builder
	var missing []string
	fmt.Fprintf(&b, "events of §12.1 in the workloads' JSON lines (%d names):\n", len(logs.Events))
	for _, e := range logs.Events {
		sc := append([]string(nil), where[e]...)
		sort.Strings(sc)
		note := ""
		if byFault[e] {
			note = " (by fault: not on every run)"
		}
		fmt.Fprintf(&b, "  %-34s %7d  %s%s\n", e, counts[e], strings.Join(sc, " "), note)
		if counts[e] == 0 && !byFault[e] {
			missing = append(missing, e)
		}
	}
	return b.String(), missing
}
