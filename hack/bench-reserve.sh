#!/usr/bin/env bash
# bench-reserve.sh — throughput of the reserve Lua script through our Go
# store, next to the ceiling measured in the same run: redis-benchmark
# calling EVALSHA of the same script (same keys layout, a new buyer per call).
# Medians of RUNS runs each; the machine is small and noisy. The KEYS and
# ARGV below follow reserve.lua's header: keep them in step (the smoke test,
# hack/benchsmoke, runs this script in make test with tiny counts).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-3}"
N="${N:-100000}"
# shellcheck disable=SC1091
set -a; . "$ROOT/.stack/env"; set +a
PORT="${SECKILL_REDIS_ADDR##*:}"
# As the workloads log in: the stack's ACL user (INFO for the CPU figures
# is allowed it; nothing here needs the admin).
# TLS as well, verified against the stack's CA (the ceiling pays it too).
TLS=(--tls --cacert "$SECKILL_REDIS_CA_FILE")
AUTH=("${TLS[@]}" --user "$SECKILL_REDIS_USERNAME" --pass "$SECKILL_REDIS_PASSWORD" --no-auth-warning)
cli() { redis-cli -p "$PORT" "${AUTH[@]}" "$@"; }

sha=$(cli SCRIPT LOAD "$(cat "$ROOT/workloads/redisstore/lua/reserve.lua")")
tag="{bench:$(date +%s)}"
cli SET "seckill:$tag:window" ACTIVE >/dev/null
cli SET "seckill:$tag:stock" 1000000000 >/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Redis's CPU seconds so far (main and background threads), for its CPU per call.
redis_cpu() { cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'; }

ceiling=()
cpu_us=()
for _ in $(seq "$RUNS"); do
  before=$(redis_cpu)
  rps=$(redis-benchmark -p "$PORT" "${TLS[@]}" --user "$SECKILL_REDIS_USERNAME" -a "$SECKILL_REDIS_PASSWORD" -n "$N" -c 32 -r 1000000000 -q \
    EVALSHA "$sha" 9 "seckill:$tag:window" "seckill:$tag:stock" "seckill:$tag:counter" \
    "seckill:$tag:request:__rand_int__" "seckill:$tag:user:__rand_int__" \
    "seckill:$tag:reservation:__rand_int__" "seckill:$tag:send_due" "seckill:$tag:open" "seckill:$tag:rate:__rand_int__" \
    rid mid req 1 1 __rand_int__ -1 1782360000000 1782360300000 1782360005000 600000 1 1 t 20 10000 s \
    | tr '\r' '\n' | sed -nE 's/.*: ([0-9.,]+) requests per second.*/\1/p' | tail -1 | tr -d ',')
  [ -n "$rps" ] || { echo "redis-benchmark gave no figure (a script error?)" >&2; exit 1; }
  ceiling+=("$rps")
  cpu_us+=("$(awk -v a="$before" -v b="$(redis_cpu)" -v n="$N" 'BEGIN {printf "%.2f", (b - a) * 1e6 / n}')")
done

if [ -n "${CEILING_ONLY:-}" ]; then # bench-sale wants the ceiling alone
  echo "  ceiling  redis-benchmark EVALSHA, 32 connections : $(printf '%s\n' "${ceiling[@]}" | median) calls/s, $(printf '%s\n' "${cpu_us[@]}" | median) µs of Redis CPU per call"
  cli --scan --pattern "seckill:$tag:*" | xargs -r -n 500 redis-cli -p "$PORT" "${AUTH[@]}" DEL >/dev/null
  exit 0
fi

ours=()
for _ in $(seq "$RUNS"); do
  r=$(cd "$ROOT" && go test -run '^$' -bench '^BenchmarkReserve$' -benchtime "${N}x" -count 1 ./workloads/redisstore/ \
    | awk '/BenchmarkReserve/ {for (i=1;i<=NF;i++) if ($(i+1)=="reserves/s") print $i}')
  [ -n "$r" ] || { echo "BenchmarkReserve gave no figure" >&2; exit 1; }
  ours+=("$r")
done

# Drop the bench keys (SCAN, never KEYS).
cli --scan --pattern "seckill:$tag:*" | xargs -r -n 500 redis-cli -p "$PORT" "${AUTH[@]}" DEL >/dev/null

c=$(printf '%s\n' "${ceiling[@]}" | median)
o=$(printf '%s\n' "${ours[@]}" | median)
echo "reserve.lua, $RUNS runs of $N calls each (median)"
echo "  ceiling  redis-benchmark EVALSHA, 32 connections : ${c} calls/s   (runs: ${ceiling[*]}; Redis CPU per call µs: ${cpu_us[*]})"
echo "  ours     Go store.Reserve, parallel goroutines   : ${o} calls/s   (runs: ${ours[*]})"
awk -v o="$o" -v c="$c" 'BEGIN { printf "  ratio    %.0f%% of the ceiling\n", 100 * o / c }'
