#!/usr/bin/env bash
# stack.sh — the real local stack the tests and the demo run on.
#
#   hack/stack.sh up      install (Debian packages, Maven jars, Go-built envtest
#                         assets), configure and start everything; idempotent
#   hack/stack.sh down    stop exactly what "up" started (pid files)
#   hack/stack.sh status  what is running
#   hack/stack.sh env     print the env file the tests read
#
# Everything lives under STACK_DIR (default <repo>/.stack) and listens on
# 127.0.0.1 only, on project ports (override with the variables below):
#   PostgreSQL 15 ............... SECKILL_PG_PORT        25432
#   Redis primary / replica / Sentinel SECKILL_REDIS_PORT 26379 / +1 / +2
#   Redis Cluster (3 masters) ... SECKILL_CLUSTER_PORT   27001..27003 (cluster bus 27101..27103)
#   RocketMQ namesrv / gRPC ..... SECKILL_RMQ_NAMESRV_PORT 29876, SECKILL_RMQ_GRPC_PORT 28081
#                                 (broker 30911 and 30909/30912, remoting 28080)
#   envtest kube-apiserver+etcd . built from Go modules, cached by version
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${STACK_DIR:-$ROOT/.stack}"
CACHE="${SECKILL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill}"
PG_PORT="${SECKILL_PG_PORT:-25432}"
REDIS_PORT="${SECKILL_REDIS_PORT:-26379}"
REPLICA_PORT=$((REDIS_PORT + 1))
SENTINEL_PORT=$((REDIS_PORT + 2))
SENTINEL_MASTER=seckill-primary
CLUSTER_PORT="${SECKILL_CLUSTER_PORT:-27001}"
export RMQ_NAMESRV_PORT="${SECKILL_RMQ_NAMESRV_PORT:-29876}"
export RMQ_GRPC_PORT="${SECKILL_RMQ_GRPC_PORT:-28081}"
export RMQ_BROKER_PORT="${SECKILL_RMQ_BROKER_PORT:-30911}"
export RMQ_REMOTING_PORT="${SECKILL_RMQ_REMOTING_PORT:-28080}"
export RMQ_RUN_DIR="$STACK_DIR/rocketmq"
export RMQ_CACHE="$CACHE"
ENV_FILE="$STACK_DIR/env"
PG_USER=seckill
PG_PASSWORD=seckill
RMQ="$ROOT/hack/rocketmq/rmq.sh"

# Topics and consumer groups. Names are shared with the Go code through
# workloads/names (keep both lists in step; a test checks that every topic the
# code uses exists).
TOPICS_NORMAL="seckill-order-create seckill-order-events seckill-test-normal seckill-test-order-create seckill-test-order-events seckill-test-crash-create seckill-test-poison"
TOPICS_DELAY="seckill-order-cancel seckill-test-delay"
GROUPS_PROD="seckill-order-consumer seckill-projector seckill-canceller"
GROUP_RETRIES=8 # names.RetryLimit
# The DLQ replayers read messages that already used up another group's
# attempts (the count carries over), so their limit must be higher.
GROUPS_REPLAY="seckill-dlq-replayer seckill-test-replayer"
REPLAY_RETRIES=32
GROUPS_TEST="seckill-test-group seckill-test-delay-group seckill-test-dlq-group seckill-test-consumer seckill-test-projector seckill-test-crash seckill-test-canceller"
TEST_GROUP_RETRIES=2
GROUP_POISON=seckill-test-poison # retry 1: the DLQ test

log() { printf '[stack] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_port() { # <port> <name> [seconds]
  local i=0 max="${3:-60}"
  until port_busy "$1"; do
    i=$((i + 1)); [ "$i" -le "$max" ] || die "$2 did not listen on $1 within ${max}s"
    sleep 1
  done
}

apt_updated=""
apt_install() { # <command-to-check> <packages...>
  local probe="$1"; shift
  [ -x "$probe" ] || command -v "$probe" >/dev/null 2>&1 && return 0
  log "installing $* from Debian's packages"
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# ---------------------------------------------------------------- packages
install_packages() {
  apt_install /usr/lib/postgresql/15/bin/postgres postgresql-15 postgresql-client-15
  apt_install redis-server redis-server redis-tools
  apt_install java openjdk-17-jre-headless
  apt_install mvn maven
}

# ---------------------------------------------------------------- PostgreSQL
PG_BIN=/usr/lib/postgresql/15/bin
# The server refuses to run as root: it runs as Debian's postgres user, in our
# own data directory. When that user cannot reach STACK_DIR (a clone under
# /root, say), the data directory lives under /var/tmp, keyed by STACK_DIR.
pg_dir() {
  mkdir -p "$STACK_DIR"
  if runuser -u postgres -- test -x "$STACK_DIR" 2>/dev/null; then
    echo "$STACK_DIR/pg"
  else
    echo "/var/tmp/seckill-pg-$(printf '%s' "$STACK_DIR" | sha256sum | cut -c1-12)"
  fi
}
PG_DIR="$(pg_dir)"
pg_up() {
  local data="$PG_DIR/data" sock="$PG_DIR/run"
  mkdir -p "$PG_DIR" "$sock"
  chown postgres:postgres "$PG_DIR" "$sock"
  if [ ! -f "$data/PG_VERSION" ]; then
    log "PostgreSQL: initdb in $data"
    runuser -u postgres -- "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >> "$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$sock'
max_connections = 300
shared_buffers = 256MB
fsync = on
synchronous_commit = on
log_min_messages = warning
EOF
  fi
  if runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    log "PostgreSQL already running on $PG_PORT"
  else
    port_busy "$PG_PORT" && die "port $PG_PORT is in use by something else"
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -l "$PG_DIR/server.log" -w -t 60 start >/dev/null
    log "PostgreSQL started on $PG_PORT"
  fi
  local psql=("$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qtA)
  if [ -z "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname='$PG_USER'")" ]; then
    "${psql[@]}" -c "CREATE ROLE $PG_USER LOGIN SUPERUSER PASSWORD '$PG_PASSWORD'" >/dev/null
  fi
  if [ -z "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname='seckill'")" ]; then
    "${psql[@]}" -c "CREATE DATABASE seckill OWNER $PG_USER" >/dev/null
  fi
}
pg_down() {
  local data="$PG_DIR/data"
  [ -f "$data/postmaster.pid" ] || return 0
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 && log "PostgreSQL stopped" || true
}

# ---------------------------------------------------------------- Redis
redis_start() { # <name> <port> [extra args...]
  local name="$1" port="$2"; shift 2
  local dir="$STACK_DIR/redis/$name"
  mkdir -p "$dir"
  if pid_alive "$dir/redis.pid"; then log "Redis $name already running on $port"; return 0; fi
  port_busy "$port" && die "port $port is in use by something else"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save "" --appendonly no \
    --protected-mode no "$@"
  wait_port "$port" "Redis $name" 20
  log "Redis $name started on $port"
}
redis_up() {
  redis_start primary "$REDIS_PORT"
  redis_start replica "$REPLICA_PORT" --replicaof 127.0.0.1 "$REDIS_PORT"
  local p nodes=""
  for i in 0 1 2; do
    p=$((CLUSTER_PORT + i))
    # The cluster bus port defaults to port + 10000 (37001..), inside the
    # kernel's ephemeral range: an outgoing connection that happens to hold
    # it makes the node exit. Pin it next to the node instead.
    port_busy $((p + 100)) && die "port $((p + 100)) (cluster bus of $p) is in use by something else"
    redis_start "cluster-$i" "$p" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 5000 \
      --cluster-port $((p + 100))
    nodes+=" 127.0.0.1:$p"
  done
  if ! redis-cli -p "$CLUSTER_PORT" cluster info | grep -q 'cluster_state:ok'; then
    if [ "$(redis-cli -p "$CLUSTER_PORT" cluster info | awk -F: '/cluster_known_nodes/ {print $2+0}')" -le 1 ]; then
      # shellcheck disable=SC2086
      redis-cli --cluster create $nodes --cluster-replicas 0 --cluster-yes >/dev/null
    fi
    local i=0
    until redis-cli -p "$CLUSTER_PORT" cluster info | grep -q 'cluster_state:ok'; do
      i=$((i + 1)); [ "$i" -le 30 ] || die "Redis Cluster did not reach cluster_state:ok"
      sleep 1
    done
    log "Redis Cluster formed on $CLUSTER_PORT..$((CLUSTER_PORT + 2))"
  fi
  local i=0
  until redis-cli -p "$REPLICA_PORT" info replication | grep -q 'master_link_status:up'; do
    i=$((i + 1)); [ "$i" -le 30 ] || die "Redis replica did not connect to the primary"
    sleep 1
  done
  sentinel_up
}

# One Sentinel watching the primary (quorum 1): the workloads' sentinel mode
# is tested against it. Sentinel rewrites its config, so it gets a fresh one
# whenever it is (re)started.
sentinel_up() {
  local dir="$STACK_DIR/redis/sentinel"
  mkdir -p "$dir"
  if pid_alive "$dir/redis.pid"; then log "Redis Sentinel already running on $SENTINEL_PORT"; return 0; fi
  port_busy "$SENTINEL_PORT" && die "port $SENTINEL_PORT is in use by something else"
  cat > "$dir/sentinel.conf" <<CONF
port $SENTINEL_PORT
bind 127.0.0.1
protected-mode no
daemonize yes
pidfile $dir/redis.pid
logfile $dir/redis.log
dir $dir
sentinel monitor $SENTINEL_MASTER 127.0.0.1 $REDIS_PORT 1
sentinel down-after-milliseconds $SENTINEL_MASTER 5000
CONF
  redis-server "$dir/sentinel.conf" --sentinel
  wait_port "$SENTINEL_PORT" "Redis Sentinel" 20
  local i=0
  until redis-cli -p "$SENTINEL_PORT" sentinel get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | grep -q "$REDIS_PORT"; do
    i=$((i + 1)); [ "$i" -le 30 ] || die "Redis Sentinel does not know the primary"
    sleep 1
  done
  log "Redis Sentinel started on $SENTINEL_PORT (master $SENTINEL_MASTER)"
}
redis_down() {
  local f
  for f in "$STACK_DIR"/redis/*/redis.pid; do
    [ -f "$f" ] || continue
    if pid_alive "$f"; then kill -TERM "$(cat "$f")" && log "Redis $(basename "$(dirname "$f")") stopped"; fi
    rm -f "$f"
  done
  rm -rf "$STACK_DIR"/redis/cluster-*  # cluster membership is re-formed on every up
}

# ---------------------------------------------------------------- RocketMQ
rmq_up() {
  "$RMQ" fetch
  "$RMQ" start
  # Topics and groups: one mqadmin JVM each, run side by side.
  local t g pids=()
  for t in $TOPICS_NORMAL; do "$RMQ" topic "$t" NORMAL & pids+=($!); done
  for t in $TOPICS_DELAY; do "$RMQ" topic "$t" DELAY & pids+=($!); done
  for g in $GROUPS_PROD; do "$RMQ" group "$g" "$GROUP_RETRIES" & pids+=($!); done
  for g in $GROUPS_TEST; do "$RMQ" group "$g" "$TEST_GROUP_RETRIES" & pids+=($!); done
  for g in $GROUPS_REPLAY; do "$RMQ" group "$g" "$REPLAY_RETRIES" & pids+=($!); done
  "$RMQ" group "$GROUP_POISON" 1 & pids+=($!)
  local p failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  [ "$failed" = 0 ] || die "creating RocketMQ topics or groups failed"
}
rmq_down() { [ -d "$RMQ_RUN_DIR" ] && "$RMQ" stop || true; }

# ---------------------------------------------------------------- envtest
envtest_up() {
  "$ROOT/hack/envtest-assets.sh" "$STACK_DIR/k8s"
}

write_env() {
  cat > "$ENV_FILE.tmp" <<EOF
# Written by hack/stack.sh up; read by the tests and the demo.
SECKILL_PG_DSN=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/seckill?sslmode=disable
SECKILL_PG_ADMIN_DSN=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres?sslmode=disable
SECKILL_REDIS_ADDR=127.0.0.1:$REDIS_PORT
SECKILL_REDIS_REPLICA_ADDR=127.0.0.1:$REPLICA_PORT
SECKILL_REDIS_SENTINEL_ADDR=127.0.0.1:$SENTINEL_PORT
SECKILL_REDIS_SENTINEL_MASTER=$SENTINEL_MASTER
SECKILL_REDIS_CLUSTER_ADDRS=127.0.0.1:$CLUSTER_PORT,127.0.0.1:$((CLUSTER_PORT + 1)),127.0.0.1:$((CLUSTER_PORT + 2))
SECKILL_RMQ_ENDPOINT=127.0.0.1:$RMQ_GRPC_PORT
SECKILL_RMQ_NAMESRV=127.0.0.1:$RMQ_NAMESRV_PORT
KUBEBUILDER_ASSETS=$STACK_DIR/k8s
EOF
  mv "$ENV_FILE.tmp" "$ENV_FILE"
}

cmd_up() {
  mkdir -p "$STACK_DIR"
  # The longest step (building kube-apiserver on a cold cache) runs beside the rest.
  envtest_up > "$STACK_DIR/envtest-build.log" 2>&1 &
  local envtest_pid=$!
  install_packages
  pg_up
  redis_up
  rmq_up
  if ! wait "$envtest_pid"; then tail -n 30 "$STACK_DIR/envtest-build.log" >&2; die "building envtest assets failed"; fi
  log "envtest assets: $(tr '\n' ' ' < "$STACK_DIR/k8s/VERSIONS")"
  write_env
  log "stack is up; endpoints in $ENV_FILE:"
  grep -v '^#' "$ENV_FILE" >&2
}

cmd_down() {
  rmq_down
  redis_down
  pg_down
}

cmd_status() {
  local data="$PG_DIR/data"
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1 && echo "postgresql: up ($PG_PORT)" || echo "postgresql: down"
  local f
  for f in "$STACK_DIR"/redis/*/redis.pid; do
    [ -f "$f" ] && pid_alive "$f" && echo "redis $(basename "$(dirname "$f")"): up"
  done
  pid_alive "$RMQ_RUN_DIR/namesrv.pid" && echo "rocketmq namesrv: up ($RMQ_NAMESRV_PORT)" || echo "rocketmq namesrv: down"
  pid_alive "$RMQ_RUN_DIR/proxy.pid" && echo "rocketmq broker+proxy: up (gRPC $RMQ_GRPC_PORT)" || echo "rocketmq broker+proxy: down"
  [ -f "$STACK_DIR/k8s/VERSIONS" ] && echo "envtest: $(tr '\n' ' ' < "$STACK_DIR/k8s/VERSIONS")" || echo "envtest: not built"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cat "$ENV_FILE" ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
