package states_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/workloads/states"
)

var (
	comment    = regexp.MustCompile(`(?m)--.*$`)
	spaces     = regexp.MustCompile(`\s+`)
	literal    = regexp.MustCompile(`'([A-Z_]+)'`)
	checkList  = regexp.MustCompile(`CONSTRAINT ck_(\w+)_status CHECK \(status IN \(([^)]*)\)\)`)
	caseResult = regexp.MustCompile(`(?:THEN|ELSE) '([A-Z_]+)'`)
	updateHead = regexp.MustCompile(`UPDATE (\w+)(?: AS (\w+))? SET status = `)
	// A predicate on a status column: [qualifier.]status = 'X' | <> 'X' | IN ('X', ...).
	predicate = regexp.MustCompile(`(?:(\w+)\.)?status (=|<>|IN) (\('[A-Z_', ]+\)|'[A-Z_]+')`)
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return spaces.ReplaceAllString(comment.ReplaceAllString(string(b), ""), " ")
}

func machine(table string) (states.Any, bool) {
	for _, m := range states.All {
		if m.Name() == table {
			return m, true
		}
	}
	return nil, false
}

// Each machine's states are exactly its table's CHECK constraint.
func TestStatesAreTheCheckConstraints(t *testing.T) {
	files, err := filepath.Glob("../migrations/sql/*.sql")
	require.NoError(t, err)
	found := map[string][]string{}
	for _, f := range files {
		for _, m := range checkList.FindAllStringSubmatch(read(t, f), -1) {
			var list []string
			for _, l := range literal.FindAllStringSubmatch(m[2], -1) {
				list = append(list, l[1])
			}
			sort.Strings(list)
			found[m[1]] = list
		}
	}
	for _, m := range states.All {
		if m.Name() == states.RedisHash.Table {
			continue // a Redis hash has no CHECK constraint: TestScriptsMoveOnlyAlongTheHashMachine holds it
		}
		require.Equal(t, found[m.Name()], m.StateNames(), "%s: the Go states and the CHECK constraint", m.Name())
	}
}

// transition is one UPDATE of a status column found in a SQL file.
type transition struct {
	file, table string
	from, to    []string // nil from: not guarded by the current state
}

// transitions reads the UPDATEs of status columns in a SQL file: the
// literal targets of the SET (a CASE's THEN branches; a column is every
// state; a parameter is left to its Go caller) and the sources its statement
// guards on (predicates on the table's own status, unqualified or through
// its alias).
func transitions(t *testing.T, path string) []transition {
	sql := read(t, path)
	heads := updateHead.FindAllStringSubmatchIndex(sql, -1)
	var out []transition
	for i, h := range heads {
		table, alias := sql[h[2]:h[3]], ""
		if h[4] >= 0 {
			alias = sql[h[4]:h[5]]
		}
		m, ok := machine(table)
		if !ok {
			continue
		}
		// The statement runs to the next UPDATE; a CTE before the first
		// UPDATE (the claim's candidates, the freeze's remembered row)
		// belongs to it.
		prefix := ""
		if i == 0 {
			prefix = sql[:h[0]]
		}
		end := len(sql)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		// The SET expression runs to the next top-level comma.
		rest := sql[h[1]:end]
		expr := rest
		depth := 0
		for j, r := range rest {
			if r == '(' || strings.HasPrefix(rest[j:], "CASE ") {
				depth++
			}
			if r == ')' || strings.HasPrefix(rest[j:], "END") {
				depth--
			}
			if (r == ',' || strings.HasPrefix(rest[j:], " WHERE ") || strings.HasPrefix(rest[j:], " FROM ")) && depth <= 0 {
				expr = rest[:j]
				break
			}
		}
		tr := transition{file: path, table: table}
		if strings.HasPrefix(expr, "CASE") {
			for _, l := range caseResult.FindAllStringSubmatch(expr, -1) {
				tr.to = append(tr.to, l[1]) // an ELSE $n is its caller's state
			}
		} else if lits := literal.FindAllStringSubmatch(expr, -1); len(lits) > 0 && !strings.Contains(expr, "$") {
			for _, l := range lits {
				tr.to = append(tr.to, l[1])
			}
		} else if !strings.Contains(expr, "$") {
			tr.to = m.StateNames() // a column (the freeze's remembered state): any state
		} // a parameter: the Go caller passes a state (repair.Store.Resolve: APPLIED or REJECTED)
		guard := prefix + " " + rest[len(expr):]
		for _, p := range predicate.FindAllStringSubmatch(guard, -1) {
			if q := p[1]; q != "" && q != alias && q != table {
				continue // another table's status
			}
			var lits []string
			for _, l := range literal.FindAllStringSubmatch(p[3], -1) {
				lits = append(lits, l[1])
			}
			if p[2] == "<>" {
				for _, s := range m.StateNames() {
					if s != lits[0] {
						tr.from = append(tr.from, s)
					}
				}
				continue
			}
			tr.from = append(tr.from, lits...)
		}
		out = append(out, tr)
	}
	return out
}

// Every status UPDATE in the workloads' SQL is guarded by the current state
// and moves only along the machine's transitions.
func TestSQLMovesOnlyAlongTheMachines(t *testing.T) {
	files, err := filepath.Glob("../*/sql/*.sql")
	require.NoError(t, err)
	checked := 0
	for _, f := range files {
		if strings.Contains(f, "/migrations/") {
			continue
		}
		for _, tr := range transitions(t, f) {
			m, _ := machine(tr.table)
			require.NotEmpty(t, tr.from, "%s: UPDATE %s SET status is not guarded by the current state", tr.file, tr.table)
			for _, from := range tr.from {
				for _, to := range tr.to {
					if from == to && !m.AllowsNames(from, to) {
						continue // a guard listing the target itself (idempotent re-entry) is no transition
					}
					require.True(t, m.AllowsNames(from, to), "%s: %s %s → %s is not a transition of states.%s", tr.file, tr.table, from, to, tr.table)
				}
			}
			checked++
		}
	}
	require.GreaterOrEqual(t, checked, 20, "the SQL files were read")
}

func TestAllows(t *testing.T) {
	require.True(t, states.Order.Allows(states.OrderCancelPending, states.OrderPaid))
	require.False(t, states.Order.Allows(states.OrderPaid, states.OrderCancelled), "a PAID order is never cancelled")
	require.False(t, states.Reservation.Allows(states.ReservationOrderCreated, states.ReservationCompensated), "a reservation with an order is never compensated")
	require.False(t, states.Outbox.Allows(states.OutboxSent, states.OutboxRetry))
	require.False(t, states.RedisHash.Allows(states.HashOrderCreated, states.HashCompensated), "a hash with an order is never compensated")
	require.Error(t, states.Reservation.Check(states.ReservationCancelled, states.ReservationReserved))
	require.NoError(t, states.Reservation.Check(states.ReservationReserved, states.ReservationOrderCreated))
}

// docs/states.md draws every machine as it is (regenerate it with
// SECKILL_WRITE_STATES_DOC=1 go test ./workloads/states/).
func TestDiagramsAreCurrent(t *testing.T) {
	var b strings.Builder
	b.WriteString("# State machines\n\nGenerated from `workloads/states` (the tables the SQL is checked against); each table's\nstates are also its CHECK constraint.\n")
	for _, m := range states.All {
		b.WriteString("\n## `" + m.Name() + "`\n\n" + m.Mermaid())
	}
	const path = "../../docs/states.md"
	if os.Getenv("SECKILL_WRITE_STATES_DOC") == "1" {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, b.String(), string(got), "docs/states.md is stale: SECKILL_WRITE_STATES_DOC=1 go test ./workloads/states/")
}
