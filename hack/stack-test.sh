#!/usr/bin/env bash
# stack-test.sh — the stack script's own test (make stack-test; .ci/run):
#   1. up, then up again: the second changes nothing (same pids)
#   2. kill -9 one Redis Cluster node and the name server: up restarts only those two
#   3. down, then up with every core saturated by a CPU burner of ours (bounded in
#      time): it still succeeds
#   4. down leaves no process of ours and every port of the stack free
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK="$ROOT/hack/stack.sh"
STACK_DIR="${STACK_DIR:-$ROOT/.stack}"
LOG_TAG=stack-test
# shellcheck source=lib.sh
. "$ROOT/hack/lib.sh"
UP_ARGS=(${STACK_TEST_UP_ARGS:-})
mkdir -p "$STACK_DIR"

PIDFILES=(redis/primary/redis.pid redis/replica/redis.pid redis/sentinel/redis.pid
  redis/cluster-0/redis.pid redis/cluster-1/redis.pid redis/cluster-2/redis.pid
  rocketmq/namesrv.pid rocketmq/proxy.pid)
PORTS="25432 26379 26380 26381 27001 27002 27003 27101 27102 27103 29876 28081 28080 30911 30909 30912"

pids() { # one line "file=pid" per component; PostgreSQL by its postmaster.pid
  local f
  for f in "${PIDFILES[@]}"; do echo "$f=$(cat "$STACK_DIR/$f" 2>/dev/null || echo none)"; done
  echo "pg=$(head -n 1 "$(ls "$STACK_DIR"/pg/data/postmaster.pid /var/tmp/seckill-pg-*/data/postmaster.pid 2>/dev/null | head -n 1)" 2>/dev/null || echo none)"
}
up() { local t0=$SECONDS; "$STACK" up "${UP_ARGS[@]}" > "$STACK_DIR/stack-test-up.log" 2>&1 \
  || { cat "$STACK_DIR/stack-test-up.log" >&2; die "hack/stack.sh up failed ($1)"; }
  log "up ($1): ok in $((SECONDS - t0))s"; }

burners=()
stop_burners() { local p; for p in "${burners[@]}"; do kill "$p" 2>/dev/null || true; done; burners=(); }
trap stop_burners EXIT

# 1. up twice
up "first"
"$STACK" status > /dev/null || die "status reports something down after up"
before=$(pids)
up "second, nothing to do"
[ "$(pids)" = "$before" ] || die "a second up restarted something: $(diff <(echo "$before") <(pids) || true)"

# 2. one Redis node and the name server killed
kill -9 "$(cat "$STACK_DIR/redis/cluster-1/redis.pid")" "$(cat "$STACK_DIR/rocketmq/namesrv.pid")"
up "after kill -9 of Redis cluster-1 and the name server"
after=$(pids)
changed=$(diff <(echo "$before") <(echo "$after") | grep '^>' | cut -d' ' -f2 | cut -d= -f1 | sort | tr '\n' ' ' || true)
[ "$changed" = "redis/cluster-1/redis.pid rocketmq/namesrv.pid " ] || die "expected only cluster-1 and namesrv restarted, changed: '$changed'"
info=$(REDISCLI_AUTH="$(sed -n 's/^SECKILL_REDIS_ADMIN_PASSWORD=//p' "$STACK_DIR/env")" redis-cli --tls --cacert "$STACK_DIR/tls/ca.crt" -p 27001 cluster info)
grep -q cluster_state:ok <<<"$info" || die "Redis Cluster not ok after the node came back"

# 3. up from nothing with every core busy
"$STACK" down > /dev/null 2>&1
n=$(( $(nproc) * 4 ))
for _ in $(seq 1 "$n"); do timeout "${STACK_TEST_BURN_SECONDS:-600}" sh -c 'while :; do :; done' & burners+=($!); done
log "$n CPU burners running (load: $(cut -d' ' -f1 /proc/loadavg))"
up "from nothing, with $n CPU burners"
stop_burners

# 4. down leaves nothing
"$STACK" down > /dev/null 2>&1 || die "down failed"
left=$(OWN_DIRS="$STACK_DIR $(ls -d /var/tmp/seckill-pg-* 2>/dev/null | tr '\n' ' ')" our_pids)
[ -z "$left" ] || die "processes of ours left after down: $left"
for p in $PORTS; do port_busy "$p" && die "port $p still listening after down"; done
log "passed"
