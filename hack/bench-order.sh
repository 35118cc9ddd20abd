#!/usr/bin/env bash
# bench-order.sh — throughput of the order consumer's transaction (seed
# §9.3) through our Go code, next to the ceiling measured in the same run:
# pgbench running the same statements (hack/bench/order_txn.pgbench, kept
# equal to the consumer's SQL by a test) with the same 32 connections.
# Medians of RUNS runs of N transactions each; the machine is small and noisy.
# make test runs it with tiny counts (hack/benchsmoke), so it cannot rot.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-3}"
N="${N:-20000}"
CLIENTS=32
# shellcheck disable=SC1091
set -a; . "$ROOT/.stack/env"; set +a
PGBENCH="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1)"
[ -x "$PGBENCH" ] || PGBENCH="$(command -v pgbench)"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
db_dsn() { echo "${SECKILL_PG_ADMIN_DSN%/*}/$1?sslmode=disable"; }

(cd "$ROOT" && go build -o "$ROOT/bin/seckill" ./workloads/cmd/seckill)
ceiling=()
for i in $(seq "$RUNS"); do
  db="bench_order_$$_$i"
  psql -q "$SECKILL_PG_ADMIN_DSN" -c "CREATE DATABASE $db" >/dev/null
  "$ROOT/bin/seckill" migrate -dsn "$(db_dsn "$db")" >/dev/null
  psql -q "$(db_dsn "$db")" -c "INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES (1001, 90001, 1000000000000, 1000000000000)" >/dev/null
  tps=$("$PGBENCH" -n -M prepared -c "$CLIENTS" -j 2 -t $((N / CLIENTS)) -f "$ROOT/hack/bench/order_txn.pgbench" \
      -D grp=seckill-order-consumer -D topic=seckill-order-create -D etype=ORDER_CREATE_REQUESTED \
      -D activity=1001 -D sku=90001 -D bucket=0 -D "window=900000 milliseconds" -D agg=ORDER \
      -D evtype=ORDER_CREATED -D evtopic=seckill-order-events -D ctopic=seckill-order-cancel -D result=ORDER_CREATED \
      "$(db_dsn "$db")" 2>&1 | sed -nE 's/^tps = ([0-9.]+) .*without initial connection.*/\1/p')
  orders=$(psql -tA "$(db_dsn "$db")" -c "SELECT count(*) FROM orders")
  psql -q "$SECKILL_PG_ADMIN_DSN" -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
  [ -n "$tps" ] && [ "$orders" -gt 0 ] || { echo "pgbench run $i failed (tps '$tps', orders $orders)" >&2; exit 1; }
  ceiling+=("${tps%.*}")
done

ours=()
for _ in $(seq "$RUNS"); do
  r=$(cd "$ROOT" && go test -run '^$' -bench '^BenchmarkOrderTransaction$' -benchtime "${N}x" -count 1 ./workloads/orderstore/ \
    | awk '/BenchmarkOrderTransaction/ {for (i=1;i<=NF;i++) if ($(i+1)=="orders/s") print $i}')
  [ -n "$r" ] || { echo "BenchmarkOrderTransaction gave no figure" >&2; exit 1; }
  ours+=("${r%.*}")
done

c=$(printf '%s\n' "${ceiling[@]}" | median)
o=$(printf '%s\n' "${ours[@]}" | median)
echo "order transaction (seed §9.3, created path), $RUNS runs of $N each (median), $CLIENTS connections"
echo "  ceiling  pgbench -M prepared, same statements : ${c} tx/s     (runs: ${ceiling[*]})"
echo "  ours     Go orderstore.Consumer.Consume      : ${o} orders/s (runs: ${ours[*]})"
awk -v o="$o" -v c="$c" 'BEGIN { printf "  ratio    %.0f%% of the ceiling\n", 100 * o / c }'
