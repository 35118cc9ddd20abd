#!/usr/bin/env bash
# chaos-mutants.sh — the tests must be able to fail (issue 28). Each mutant
# removes one protection of the design from the source, runs the test that
# guards it on the real stack, expects it to FAIL, and restores the file.
# A mutant whose test still passes is a protection nothing checks: the
# script exits 1 and names it.
#
#   hack/chaos-mutants.sh            # every mutant
#   hack/chaos-mutants.sh NAME...    # some (names below)
#
# Needs the stack (make stack-up). Refuses to run on a file with local
# changes (it restores each file from the copy it made).
set -euo pipefail
cd "$(dirname "$0")/.."

want=("$@")
survived=()
killed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# mutant NAME FILE PERL-SUBSTITUTION PACKAGES RUN-PATTERN WHAT-IT-REMOVES
mutant() {
  local name="$1" file="$2" subst="$3" pkgs="$4" run="$5" what="$6"
  if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qx -- "$name"; then return 0; fi
  if ! git diff --quiet -- "$file"; then
    echo "chaos-mutants: $file has local changes; commit or stash them first" >&2; exit 2
  fi
  cp "$file" "$tmp/orig"
  perl -0pi -e "$subst" "$file"
  if cmp -s "$file" "$tmp/orig"; then
    echo "chaos-mutants: mutant $name no longer applies to $file (the code moved): update it" >&2; exit 2
  fi
  echo "== mutant $name: without $what"
  # shellcheck disable=SC2086 # a list of packages
  if go test -count=1 -timeout 10m -run "$run" $pkgs >"$tmp/out" 2>&1; then
    echo "   SURVIVED: the tests still pass"
    survived+=("$name")
  else
    echo "   killed: $(grep -m1 -E -- '--- FAIL|^FAIL|panic:' "$tmp/out" | head -c 200)"
    killed=$((killed + 1))
  fi
  cp "$tmp/orig" "$file"
}

mutant inbox-first workloads/inbox/sql/claim.sql \
  's/DO NOTHING/DO UPDATE SET result_code = excluded.result_code/' \
  ./workloads/orderstore '^(TestBatchCommittedButNotAcknowledged|TestSameMessageTenThousandTimes)$' \
  "the inbox claims a message once: a redelivery is answered from the inbox row"
mutant commit-verification workloads/orderstore/consume.go \
  's/(case errors.Is\(err, pgx.ErrNoRows\):\n)(\t\treturn Outcome\{Action: Retry\}, fmt.Errorf\("%w \(not committed\))/$1\t\treturn Outcome{Action: Ack}, nil\n$2/' \
  ./workloads/orderstore '^TestCommitAnswerLostOnTheWire$' \
  "a COMMIT whose answer was lost is verified: not committed means redo, never ack"
mutant committed-half-transaction workloads/orderstore/consume.go \
  's/if missing := v.incomplete\(\); missing != ""/if missing := v.incomplete(); false && missing != ""/' \
  ./workloads/orderstore '^TestCommittedInboxWithoutItsOrderGoesToReview$' \
  "a committed inbox row without its order or ledger entry goes to manual review"
mutant compensation-marker workloads/redisstore/lua/compensate.lua \
  "s/local marker = redis.call\('GET', KEYS\[3\]\)/local marker = false/" \
  './workloads/compensation ./workloads/redisstore' '^(TestCompensateTable|TestCrashAfterLuaCompletesWithoutSecondIncrement|TestCompensateConcurrentOnce|TestConcurrentWorkersCompensateOnce)$' \
  "the Lua's compensation marker: one restore per compensation id"
mutant compensation-cas workloads/compensation/sql/authorize.sql \
  "s/ AND status = 'ORDER_REJECTED'//" \
  ./workloads/compensation '.' \
  "the PostgreSQL CAS ORDER_REJECTED -> COMPENSATING before Redis is touched"
mutant cancel-pending-guard workloads/cancel/sql/cancel_final.sql \
  "s/status = 'CANCEL_PENDING'\n  AND NOT EXISTS[^\n]*/status IN ('CANCEL_PENDING', 'PAID')/" \
  ./workloads/cancel '^(TestPaymentRacesTimeoutCancel|TestCrashAfterCancelPending)$' \
  "the cancel is final only from CANCEL_PENDING and never over a recorded payment"
mutant final-stock-guard workloads/orderstore/sql/stock_occupy_many.sql \
  's/ AND available_stock >= \$3//' \
  ./workloads/orderstore '^(TestStockExhaustedIsRejectedOnceAndLateMessagesStay|TestEveryFailpointOnEveryPath)$' \
  "PostgreSQL's conditional stock decrement, the last line against oversell"

echo
echo "chaos-mutants: $killed killed, ${#survived[@]} survived ${survived[*]:-}"
[ ${#survived[@]} -eq 0 ]
