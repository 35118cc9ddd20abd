#!/usr/bin/env bash
# bench-order.sh — throughput of the order consumer (design.md#order-transaction) next to the
# ceiling measured in the same run: pgbench running the one-order-per-
# transaction statements (hack/bench/order_txn.pgbench, kept equal to the
# consumer's SQL by a test) with 32 connections. Ours, each as a ratio to it:
# Consume (one order per transaction), ConsumeBatch (a received batch in one
# transaction, DB only) and the consumer group on the real broker with 1, 2
# and 4 consumers (issue 14's goal: the group at ≥ 2× the ceiling).
# Medians of RUNS runs of N transactions each; the machine is small and noisy.
# make test runs it with tiny counts (hack/benchsmoke), so it cannot rot.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-3}"
N="${N:-10000}"
CLIENTS=32
BATCH="${BATCH:-16}"
# The consumer group first sends its messages through the broker; fewer keep a run short.
GROUP_N="${GROUP_N:-$(( N < 4000 ? N : 4000 ))}"
log() { printf '[bench-order] %s\n' "$*" >&2; }
# shellcheck disable=SC1091
set -a; . "$ROOT/.stack/env"; set +a
PGBENCH="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1)"
[ -x "$PGBENCH" ] || PGBENCH="$(command -v pgbench)"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The admin DSN with database $1 (its query, the TLS settings, kept).
db_dsn() { local base="${SECKILL_PG_ADMIN_DSN%%\?*}"; echo "${base%/*}/$1?${SECKILL_PG_ADMIN_DSN#*\?}"; }

(cd "$ROOT" && go build -o "$ROOT/bin/seckill" ./workloads/cmd/seckill)
ceiling=()
for i in $(seq "$RUNS"); do
  log "run $i/$RUNS: pgbench, $N transactions"
  db="bench_order_$$_$i"
  psql -q "$SECKILL_PG_ADMIN_DSN" -c "CREATE DATABASE $db" >/dev/null
  "$ROOT/bin/seckill" migrate -dsn "$(db_dsn "$db")" >/dev/null
  psql -q "$(db_dsn "$db")" -c "INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES (1001, 90001, 1000000000000, 1000000000000)" >/dev/null
  tps=$("$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -t $((N / CLIENTS)) -f "$ROOT/hack/bench/order_txn.pgbench" \
      -D grp=seckill-order-consumer -D topic=seckill-order-create -D etype=ORDER_CREATE_REQUESTED \
      -D activity=1001 -D sku=90001 -D bucket=0 -D "window=900000 milliseconds" -D agg=ORDER \
      -D evtype=ORDER_CREATED -D evtopic=seckill-order-events -D ctopic=seckill-order-cancel -D result=ORDER_CREATED -D units=1 \
      "$(db_dsn "$db")" 2>&1 | sed -nE 's/^tps = ([0-9.]+) .*without initial connection.*/\1/p')
  orders=$(psql -tA "$(db_dsn "$db")" -c "SELECT count(*) FROM orders")
  psql -q "$SECKILL_PG_ADMIN_DSN" -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
  [ -n "$tps" ] && [ "$orders" -gt 0 ] || { echo "pgbench run $i failed (tps '$tps', orders $orders)" >&2; exit 1; }
  ceiling+=("${tps%.*}")
done

# gobench <pkg> <bench regexp> <benchtime> <metric> [env...]: one figure per
# matching benchmark line (sub-benchmarks in order), from a single go test run.
gobench() {
  local pkg="$1" re="$2" bt="$3" metric="$4"; shift 4
  (cd "$ROOT" && env "$@" go test -run '^$' -bench "$re" -benchtime "$bt" -count 1 "$pkg" \
    | awk -v m="$metric" '/^Benchmark/ {for (i=1;i<=NF;i++) if ($(i+1)==m) printf "%d\n", $i}')
}

if [ -n "${CEILING_ONLY:-}" ]; then # bench-sale wants the ceiling alone
  echo "  ceiling  pgbench -M prepared, one order per transaction : $(printf '%s\n' "${ceiling[@]}" | median) tx/s"
  exit 0
fi

one=(); batch=(); g1=(); g2=(); g4=()
for i in $(seq "$RUNS"); do
  log "run $i/$RUNS: Consume, one order per transaction"
  r=$(gobench ./workloads/orderstore/ '^BenchmarkOrderTransaction$' "${N}x" orders/s)
  [ -n "$r" ] || { echo "BenchmarkOrderTransaction gave no figure" >&2; exit 1; }
  one+=("$r")
  log "run $i/$RUNS: ConsumeBatch, $BATCH messages per transaction"
  r=$(gobench ./workloads/orderstore/ '^BenchmarkOrderBatch$' "${N}x" orders/s "BENCH_BATCH=$BATCH")
  [ -n "$r" ] || { echo "BenchmarkOrderBatch gave no figure" >&2; exit 1; }
  batch+=("$r")
  log "run $i/$RUNS: the consumer group on the broker, $GROUP_N messages, 1, 2, 4 consumers"
  mapfile -t g < <(gobench ./workloads/pipeline/ '^BenchmarkConsumerGroup$' 1x median-orders/s "BENCH_ORDERS=$GROUP_N")
  [ "${#g[@]}" -eq 3 ] || { echo "BenchmarkConsumerGroup gave ${#g[@]} figures, want 3" >&2; exit 1; }
  g1+=("${g[0]}"); g2+=("${g[1]}"); g4+=("${g[2]}")
done

c=$(printf '%s\n' "${ceiling[@]}" | median)
line() { # line <label> <runs...>
  local label="$1" m; shift
  m=$(printf '%s\n' "$@" | median)
  awk -v l="$label" -v m="$m" -v c="$c" -v r="$*" 'BEGIN { printf "  %-52s: %6d orders/s  %4.2f× the ceiling  (runs: %s)\n", l, m, m / c, r }'
}
o=$(printf '%s\n' "${one[@]}" | median)
echo "order transaction (design.md#order-transaction, created path) on one hot SKU, medians of $RUNS runs, $CLIENTS connections"
echo "  ceiling  pgbench -M prepared, one order per transaction : ${c} tx/s     (runs: ${ceiling[*]})"
line "Consume, one order per transaction ($N)" "${one[@]}"
line "ConsumeBatch, $BATCH per transaction, 2 workers ($N)" "${batch[@]}"
line "consumer group, broker + PostgreSQL, 1 consumer ($GROUP_N)" "${g1[@]}"
line "consumer group, 2 consumers" "${g2[@]}"
line "consumer group, 4 consumers" "${g4[@]}"
awk -v o="$o" -v c="$c" 'BEGIN { printf "  ratio    %.0f%% of the ceiling (one order per transaction)\n", 100 * o / c }'
