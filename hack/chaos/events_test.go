package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/logs"
)

// The event report reads the JSON lines of each scenario's log (skipping
// the harness's plain lines and a log never written), counts each event
// and names what a full run lacks — never the events only some faults make.
func TestEventReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".log"), []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	}
	write("a", `{"level":"DEBUG","event":"reservation.created"}`, `chaos: reconcile run: exit status 1 "event":`,
		`{"level":"DEBUG","event":"reservation.created"}`, `{"msg":"no event"}`)
	write("b", `{"event":"order.commit_unknown"}`, `{"event":"reconcile.anomaly_detected"}`, `{"event":"reservation.created"}`)
	counts, where, err := eventsSeen(dir, []string{"a", "b", "never-opened"})
	require.NoError(t, err)
	require.Equal(t, 3, counts[logs.EventReservationCreated])
	require.Equal(t, []string{"a", "b"}, where[logs.EventReservationCreated])
	require.Equal(t, 1, counts[logs.EventOrderCommitUnknown])

	report, missing := eventReport(counts, where)
	require.Contains(t, report, "reservation.created")
	require.NotContains(t, missing, logs.EventReservationCreated)
	require.NotContains(t, missing, logs.EventOrderCommitUnknown)
	require.NotContains(t, missing, logs.EventCompensationRedisMissing, "by fault: not required")
	require.Contains(t, missing, logs.EventOutboxClaimed)
	require.Len(t, missing, len(logs.Events)-len(byFault)-2, "every event but the two seen and the by-fault ones")
}
