// Package readme holds the README to the code the way a new user reads it:
// the "Run the workloads by hand" section's shell blocks are run literally,
// in order, in one bash, against the local stack, with only the variables its
// table names; then every answer of the GET table is reached with the
// section's own token and request. When the README and the code part, this
// test fails.
//
// It runs under SECKILL_DOCS_CHECK=1 (`make docs-check`, which `make test`
// runs after `go test ./...`): the section's workloads use the broker's
// production topics and groups and the default ports, so it must not run
// beside the packages that use them.
package readme

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const section = "## Run the workloads by hand (no Kubernetes)"

func repoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

// readme is README.md and the process-mode section of it.
func readme(t *testing.T) (all, sec string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	require.NoError(t, err)
	all = string(b)
	i := strings.Index(all, section)
	require.GreaterOrEqual(t, i, 0, "README.md has no section %q", section)
	sec = all[i+len(section):]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	return all, sec
}

var (
	blockRE   = regexp.MustCompile("(?s)```sh\n(.*?)```")
	envNameRE = regexp.MustCompile("`(SECKILL_[A-Z0-9_]+)`")
	literalRE = regexp.MustCompile(`"(SECKILL_[A-Z0-9_]+)"`)
)

// tableVars are the variables the section's table names (its first column).
func tableVars(sec string) []string {
	var out []string
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `SECKILL_") || len(cells) < 3 {
			continue
		}
		for _, m := range envNameRE.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, m[1])
		}
	}
	sort.Strings(out)
	return out
}

// codeVars are the variables the workloads read: every "SECKILL_…" string
// in their non-test Go files (workloads/names holds most of them); the test
// kits live under internal/, outside this walk.
func codeVars(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := filepath.Join(repoRoot(), "workloads")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if m := literalRE.FindStringSubmatch(lit.Value); m != nil {
					out[m[1]] = rel
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return out
}

// Every variable a workload reads is in the section's table, and every
// variable of the table is read: the table is what the process mode takes.
// (The failpoints' variables are in the Failpoints section; the roles' DSN
// variables are named by `activity roles`, the prefix is not one.)
func TestReadmeTableIsWhatTheWorkloadsRead(t *testing.T) {
	all, sec := readme(t)
	table := tableVars(sec)
	require.NotEmpty(t, table)
	code := codeVars(t)
	elsewhere := map[string]string{"SECKILL_FAILPOINTS": "## Failpoints", "SECKILL_FAILPOINT_ODDS": "## Failpoints"}
	for v, file := range code {
		if v == "SECKILL_PG_DSN_" {
			continue
		}
		if heading, ok := elsewhere[v]; ok {
			i := strings.Index(all, heading)
			require.GreaterOrEqual(t, i, 0)
			require.Contains(t, all[i:], v, "%s (read in %s) is documented under %s", v, file, heading)
			continue
		}
		require.Contains(t, table, v, "%s is read by workloads/%s but not in the README's table", v, file)
	}
	for _, v := range table {
		_, ok := code[v]
		require.True(t, ok, "the README's table names %s, which no workload reads", v)
	}
}

// getCodes are the codes of the section's GET table, under "The HTTP API".
func getCodes(t *testing.T, all string) map[string]string {
	t.Helper()
	i := strings.Index(all, "`GET /v1/reservations/{reservation_id}`")
	require.GreaterOrEqual(t, i, 0)
	rest := all[i:]
	out := map[string]string{}
	row := regexp.MustCompile("^\\| `([A-Z_]+)` \\| ([0-9]{3}) \\|")
	started := false
	for _, line := range strings.Split(rest, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			out[m[1]] = m[2]
			started = true
		} else if started && !strings.HasPrefix(line, "|") {
			break
		}
	}
	require.NotEmpty(t, out, "no GET table")
	return out
}

// epilogue reaches every answer of the GET table with the section's own
// token function and request, one after the other, printing REACHED lines.
const epilogue = `
# ---- the test's own steps, after the README's blocks ----
answer() { curl -s -w ' %{http_code}' localhost:8080/v1/reservations/$1 -H "Authorization: Bearer $(token $2)"; }
expect() { # expect RESERVATION USER CODE HTTP [SECONDS]
  local end=$((SECONDS + ${5:-90})) out
  while :; do
    out=$(answer "$1" "$2")
    if [ "$(jq -r .code <<<"${out% *}")" = "$3" ] && [ "${out##* }" = "$4" ]; then echo "REACHED $3 $4: ${out% *}"; return 0; fi
    [ "$SECONDS" -lt "$end" ] || { echo "NOT REACHED $3 $4 within ${5:-90}s: last answer $out"; return 1; }
    sleep 0.3
  done
}
reserve() { # reserve USER: the reservation id
  curl -s localhost:8080/v1/activities/$SECKILL_ACTIVITY_ID/skus/90001/reservations \
    -H "Authorization: Bearer $(token $1)" -d "{\"request_id\":\"$(cat /proc/sys/kernel/random/uuid)\"}" | jq -er .reservation_id
}
stop() { # stop WORKLOAD: SIGTERM, then wait for it to exit
  local re="^(.*/)?seckill $1( |\$)"
  pgrep -f -- "$re" >/dev/null || { echo "no $1 running"; return 1; }
  pkill -TERM -f -- "$re"; while pgrep -f -- "$re" >/dev/null; do sleep 0.2; done
}
ready() { until curl -sf localhost:9096/readyz >/dev/null; do sleep 0.3; done; }
sql() { psql "$SECKILL_PG_DSN" -Atc "$1"; }

# The README's buyer paid: the order is PAID, the reservation answers ORDER_CREATED.
[ "$(sql "SELECT status FROM orders WHERE order_id = '$order'")" = PAID ] && echo "ORDER PAID"
expect "$rid" 1001 ORDER_CREATED 200
expect "$(cat /proc/sys/kernel/random/uuid)" 1001 NOT_FOUND 404

# QUEUED while no consumer runs; ORDER_CREATED once one does.
stop consumer
r2=$(reserve 1002)
expect "$r2" 1002 QUEUED 202 5
SECKILL_PG_DSN=$SECKILL_PG_DSN_CONSUMER seckill consumer &
expect "$r2" 1002 ORDER_CREATED 200

# ORDER_REJECTED: a message that arrives after its business deadline (a
# gateway giving 1 s, the consumer and the compensator stopped); then
# COMPENSATED once the compensator runs.
stop consumer; stop compensator; stop gateway
SECKILL_PG_DSN=$SECKILL_PG_DSN_GATEWAY seckill gateway -business-deadline 1s &
ready
r3=$(reserve 1003)
sleep 2
SECKILL_PG_DSN=$SECKILL_PG_DSN_CONSUMER seckill consumer &
expect "$r3" 1003 ORDER_REJECTED 200
SECKILL_PG_DSN=$SECKILL_PG_DSN_COMPENSATOR seckill compensator &
expect "$r3" 1003 COMPENSATED 200
stop gateway
SECKILL_PG_DSN=$SECKILL_PG_DSN_GATEWAY seckill gateway &
ready

# CANCELLED: an order not paid within a 2 s payment window.
seckill activity window -state ACTIVE -payment-window 2s
r4=$(reserve 1004)
expect "$r4" 1004 ORDER_CREATED 200
expect "$r4" 1004 CANCELLED 200 120

# MANUAL_REVIEW: a reservation held for a person that Redis no longer has.
seckill runbook freeze -reservation "$r2" -operator readme-test -reason "the README's table" -incident README-1
key=$(redis-cli --tls --cacert "$SECKILL_REDIS_CA_FILE" -u "rediss://$SECKILL_REDIS_USERNAME:$SECKILL_REDIS_PASSWORD@$SECKILL_REDIS_ADDRS" \
  --no-auth-warning --scan --pattern "seckill:{$SECKILL_ACTIVITY_ID:90001:*}:reservation:$r2")
[ -n "$key" ]
redis-cli --tls --cacert "$SECKILL_REDIS_CA_FILE" -u "rediss://$SECKILL_REDIS_USERNAME:$SECKILL_REDIS_PASSWORD@$SECKILL_REDIS_ADDRS" --no-auth-warning DEL "$key" >/dev/null
expect "$r2" 1002 MANUAL_REVIEW 200

# Nothing broken on the way: every invariant, the frozen reservation expected.
seckill runbook verify -activity-id "$SECKILL_ACTIVITY_ID" -expect-manual-review 1
echo "README STEPS DONE"
`

// TestReadmeProcessMode runs the section's blocks literally, in order, in
// one bash from the repository's root (building the binary as the section
// says), keeping after the environment block only the variables of the
// table, then the epilogue above. Every code of the GET table must be
// reached.
func TestReadmeProcessMode(t *testing.T) {
	if os.Getenv("SECKILL_DOCS_CHECK") != "1" {
		t.Skip("the README's process mode runs under SECKILL_DOCS_CHECK=1 (make docs-check, make test)")
	}
	all, sec := readme(t)
	blocks := blockRE.FindAllStringSubmatch(sec, -1)
	require.GreaterOrEqual(t, len(blocks), 5, "the section's sh blocks: build, environment, start, token, reservation, payment")
	require.Contains(t, blocks[0][1], "go build", "the first block builds the binary")
	require.Contains(t, blocks[1][1], "export ", "the second block sets the environment")
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	script.WriteString(`trap 'echo "--- exit $? at line $LINENO"; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; ` +
		`[ -z "${SECKILL_ACTIVITY_ID:-}" ] || seckill activity roles -out .stack/roles-$SECKILL_ACTIVITY_ID.env -drop || true' EXIT` + "\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "# ---- README block %d ----\n%s\n", i+1, b[1])
		if i == 1 {
			vars := strings.Join(tableVars(sec), " ")
			fmt.Fprintf(&script, "for v in $(compgen -e | grep '^SECKILL_' || true); do case \" %s \" in *\" $v \"*) ;; *) unset \"$v\" ;; esac; done\n", vars)
		}
	}
	script.WriteString(epilogue)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = repoRoot()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GOFLAGS=" + os.Getenv("GOFLAGS")}
	if v := os.Getenv("GOCACHE"); v != "" {
		cmd.Env = append(cmd.Env, "GOCACHE="+v)
	}
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	log := out.String()
	t.Logf("the README's steps took %s:\n%s", time.Since(start).Round(time.Second), tail(log, 120))
	require.NoError(t, err, "the README's process mode failed (output above)")
	require.Contains(t, log, "ORDER PAID", "the callback signed as the README says paid the order")
	require.Contains(t, log, "README STEPS DONE")
	for code, status := range getCodes(t, all) {
		require.Contains(t, log, "REACHED "+code+" "+status, "the GET table's %s (%s) was not answered", code, status)
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
