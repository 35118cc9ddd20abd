#!/usr/bin/env bash
# stack.sh — the real local stack the tests and the demo run on.
#
#   hack/stack.sh up [--no-envtest]
#                         install (Debian packages, Maven jars, Go-built envtest
#                         assets), configure and start everything. Idempotent in
#                         every state: what runs (by pid file) is kept, what is
#                         missing is started; a failure stops the background work
#                         it started and names the one command to retry.
#                         --no-envtest skips kube-apiserver/etcd (the demo)
#                         --k8s-background does not wait for a first Kubernetes
#                         build: it runs at idle CPU priority beside the tests
#                         (make test); the envtest suite and a later "up" wait
#   hack/stack.sh down    stop what "up" started (pid files), then any leftover of
#                         ours (a process running from or naming .stack); checked
#   hack/stack.sh status  what is running (exit 1 when something is down)
#   hack/stack.sh env     print the env file the tests read
#   hack/stack.sh fault KIND SECONDS
#                         a fault on the running stack for a sale under load:
#                         broker-restart (stopped, started), pg-freeze (every
#                         PostgreSQL process SIGSTOPped), pg-restart-fast,
#                         pg-restart-immediate, redis-freeze, redis-failover
#                         (the primary SIGKILLed, Sentinel promotes the replica)
#   hack/stack.sh redis-home
#                         the Redis primary back on its port after redis-failover
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
# The broker's ACL: the clients' user (rmq.sh creates it; the admin is
# mqadmin's, in the run directory's conf/tools.yml).
export RMQ_USER=seckill RMQ_PASSWORD=seckill-rmq
ENV_FILE="$STACK_DIR/env"
PG_USER=seckill
PG_PASSWORD=seckill
# Redis requires a login everywhere: the workloads' and tests' ACL user (no
# @admin commands: no CONFIG, DEBUG, REPLICAOF, CLIENT KILL, ACL, SHUTDOWN)
# and the default user, the stack's own admin (replication, Sentinel, this
# script's redis-cli through REDISCLI_AUTH).
REDIS_USER=seckill
REDIS_PASSWORD=seckill-redis
REDIS_ADMIN_PASSWORD=seckill-redis-admin
export REDISCLI_AUTH="$REDIS_ADMIN_PASSWORD"
REDIS_ACL=(on ">$REDIS_PASSWORD" '~*' '&*' +@all -@admin)
RMQ="$ROOT/hack/rocketmq/rmq.sh"

RMQ_RESOURCES="$ROOT/hack/rocketmq/resources.txt" # topics and groups, with types and retry counts
OWN_DIRS="$STACK_DIR" # completed below with PostgreSQL's directory

LOG_TAG=stack
# shellcheck source=lib.sh
. "$ROOT/hack/lib.sh"

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
  apt_install jq jq
  apt_install ss iproute2
  install_prometheus
}

# Debian's prometheus package: promtool for the alert rules' unit tests
# (test/monitoring) and the server the cluster sale runs on the node. Its
# service is not started (a policy-rc.d refuses it where none exists).
install_prometheus() {
  command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && return 0
  local own_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && own_policy=1
  fi
  apt_install promtool prometheus
  if [ -n "$own_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
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
OWN_DIRS="$STACK_DIR $PG_DIR"
# The stack's own certificate authority and PostgreSQL's server certificate
# (for 127.0.0.1 and the cluster node's bridge address, where pods reach it):
# every client verifies it (sslmode=verify-full). Made once, kept in .stack/tls.
TLS_DIR="$STACK_DIR/tls"
tls_up() {
  mkdir -p "$TLS_DIR"
  chmod 700 "$TLS_DIR"
  if [ ! -s "$TLS_DIR/ca.crt" ]; then
    log "TLS: the stack's certificate authority in $TLS_DIR"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -subj "/CN=seckill local stack CA" -keyout "$TLS_DIR/ca.key" -out "$TLS_DIR/ca.crt" 2>/dev/null
    rm -f "$TLS_DIR"/pg.crt "$TLS_DIR"/rmq.crt "$TLS_DIR"/redis.crt
  fi
  server_cert pg seckill-postgres
  server_cert rmq seckill-rocketmq-proxy
  # Redis's nodes present their certificate to each other too (the cluster
  # bus and replication ask the dialling node for one): client use as well.
  server_cert redis seckill-redis serverAuth,clientAuth
}
# server_cert <name> <cn> [usage]: a server certificate of the stack's CA (PKCS#8 key,
# as Netty reads it) for 127.0.0.1 and the node's bridge address.
server_cert() {
  local n="$1"
  [ -s "$TLS_DIR/$n.crt" ] && return 0
  log "TLS: the certificate of $2 in $TLS_DIR"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
    -keyout "$TLS_DIR/$n.key" -out "$TLS_DIR/$n.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:localhost\nextendedKeyUsage=%s\n' "${SECKILL_NODE_IP:-10.244.0.1}" "${3:-serverAuth}" > "$TLS_DIR/$n.ext"
  openssl x509 -req -in "$TLS_DIR/$n.csr" -CA "$TLS_DIR/ca.crt" -CAkey "$TLS_DIR/ca.key" -CAcreateserial \
    -days 825 -extfile "$TLS_DIR/$n.ext" -out "$TLS_DIR/$n.crt" 2>/dev/null
  rm -f "$TLS_DIR/$n.csr" "$TLS_DIR/$n.ext"
}

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
unix_socket_permissions = 0700
max_connections = 300
shared_buffers = 256MB
fsync = on
synchronous_commit = on
log_min_messages = warning
EOF
  fi
  # TCP is TLS only, with passwords (every client: the tests, the workloads'
  # own roles); only the socket, which only root and postgres reach, trusts.
  tls_up
  install -o postgres -g postgres -m 600 "$TLS_DIR/pg.key" "$PG_DIR/server.key"
  install -o postgres -g postgres -m 644 "$TLS_DIR/pg.crt" "$PG_DIR/server.crt"
  if ! grep -q "^ssl = on" "$data/postgresql.conf"; then
    printf "ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\nssl_min_protocol_version = 'TLSv1.2'\n" \
      "$PG_DIR/server.crt" "$PG_DIR/server.key" >> "$data/postgresql.conf"
  fi
  local hba="local all all trust
hostssl all all 127.0.0.1/32 scram-sha-256
hostnossl all all 127.0.0.1/32 reject"
  if [ "$(cat "$data/pg_hba.conf" 2>/dev/null)" != "$hba" ]; then
    printf '%s\n' "$hba" > "$data/pg_hba.conf"
    chown postgres:postgres "$data/pg_hba.conf"
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" reload >/dev/null 2>&1 || true
  fi
  if runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    log "PostgreSQL already running on $PG_PORT"
  else
    claim_port "$PG_PORT" PostgreSQL
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -l "$PG_DIR/server.log" -w -t 60 start >/dev/null
    log "PostgreSQL started on $PG_PORT"
  fi
  local psql=("$PG_BIN/psql" -h "$sock" -p "$PG_PORT" -U postgres -qtA)
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
# Every Redis of the stack speaks TLS only (no plain port): clients verify the
# stack's CA; replication, the cluster bus and Sentinel's links use TLS too.
# Clients are not asked for certificates: they log in with the ACL user.
# REDIS_TLS is the one list of these settings: every server and Sentinel
# take it, and redis_tls_args writes it for the tests' own servers
# (testenv reads $TLS_DIR/redis-server-tls.args).
REDIS_TLS=(--tls-cert-file "$TLS_DIR/redis.crt" --tls-key-file "$TLS_DIR/redis.key" --tls-ca-cert-file "$TLS_DIR/ca.crt"
  --tls-auth-clients no --tls-replication yes --tls-cluster yes)
redis_tls_args() { printf '%s\n' "${REDIS_TLS[@]}" > "$TLS_DIR/redis-server-tls.args"; }
rcli() { redis-cli --tls --cacert "$TLS_DIR/ca.crt" "$@"; }
redis_start() { # <name> <port> [extra args...]
  local name="$1" port="$2"; shift 2
  local dir="$STACK_DIR/redis/$name" a prev=""
  mkdir -p "$dir"
  if pid_alive "$dir/redis.pid"; then log "Redis $name already running on $port"; return 0; fi
  claim_port "$port" "Redis $name"
  for a in "$@"; do
    [ "$prev" = --cluster-port ] && claim_port "$a" "cluster bus of Redis $name"
    prev="$a"
  done
  redis-server --bind 127.0.0.1 --port 0 --tls-port "$port" "${REDIS_TLS[@]}" --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save "" --appendonly no \
    --protected-mode no --requirepass "$REDIS_ADMIN_PASSWORD" --masterauth "$REDIS_ADMIN_PASSWORD" \
    --user "$REDIS_USER" "${REDIS_ACL[@]}" "$@"
  wait_port "$port" "Redis $name" 20
  log "Redis $name started on $port"
}
redis_up() {
  redis_tls_args
  redis_start primary "$REDIS_PORT"
  redis_start replica "$REPLICA_PORT" --replicaof 127.0.0.1 "$REDIS_PORT"
  local p nodes=""
  for i in 0 1 2; do
    p=$((CLUSTER_PORT + i))
    # The cluster bus port defaults to port + 10000 (37001..), inside the
    # kernel's ephemeral range: an outgoing connection that happens to hold
    # it makes the node exit. Pin it next to the node instead.
    redis_start "cluster-$i" "$p" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 5000 \
      --cluster-port $((p + 100))
    nodes+=" 127.0.0.1:$p"
  done
  cluster_form "$nodes" || { log "Redis Cluster did not form: resetting its nodes and forming it again"; cluster_reset; cluster_form "$nodes"; } \
    || die "Redis Cluster did not reach cluster_state:ok (see $STACK_DIR/redis/cluster-*/redis.log)"
  local i=0
  until rcli -p "$REPLICA_PORT" info replication | grep 'master_link_status:up' >/dev/null; do
    i=$((i + 1)); [ "$i" -le 30 ] || die "Redis replica did not connect to the primary"
    sleep 1
  done
  sentinel_up
  cmd_redis_home # a chaos run stopped between two failovers
}

# cluster_form <nodes>: create the cluster when no node knows another (a node
# restarted alone rejoins from its nodes-<port>.conf), then wait for state ok.
cluster_form() {
  cluster_ok && return 0
  if [ "$(rcli -p "$CLUSTER_PORT" cluster info | awk -F: '/cluster_known_nodes/ {print $2+0}')" -le 1 ]; then
    # shellcheck disable=SC2086
    rcli --cluster create $1 --cluster-replicas 0 --cluster-yes >/dev/null || return 1
  fi
  local i=0
  until cluster_ok; do
    i=$((i + 1)); [ "$i" -le 30 ] || return 1
    sleep 1
  done
  log "Redis Cluster formed on $CLUSTER_PORT..$((CLUSTER_PORT + 2))"
}
cluster_ok() { rcli -p "$CLUSTER_PORT" cluster info 2>/dev/null | grep 'cluster_state:ok' >/dev/null; }
# The stack's cluster holds test data only: a half-formed one is emptied.
cluster_reset() {
  local i
  for i in 0 1 2; do
    rcli -p $((CLUSTER_PORT + i)) flushall >/dev/null 2>&1 || true
    rcli -p $((CLUSTER_PORT + i)) cluster reset hard >/dev/null 2>&1 || true
  done
}

# One Sentinel watching the primary (quorum 1): the workloads' sentinel mode
# is tested against it. Sentinel rewrites its config, so it gets a fresh one
# whenever it is (re)started.
sentinel_up() {
  local dir="$STACK_DIR/redis/sentinel"
  mkdir -p "$dir"
  if pid_alive "$dir/redis.pid"; then log "Redis Sentinel already running on $SENTINEL_PORT"; return 0; fi
  claim_port "$SENTINEL_PORT" "Redis Sentinel"
  cat > "$dir/sentinel.conf" <<CONF
port 0
tls-port $SENTINEL_PORT
bind 127.0.0.1
protected-mode no
daemonize yes
pidfile $dir/redis.pid
logfile $dir/redis.log
dir $dir
requirepass $REDIS_ADMIN_PASSWORD
user $REDIS_USER ${REDIS_ACL[*]} +sentinel|get-master-addr-by-name +sentinel|replicas +sentinel|sentinels +sentinel|slaves
sentinel monitor $SENTINEL_MASTER 127.0.0.1 $REDIS_PORT 1
sentinel auth-pass $SENTINEL_MASTER $REDIS_ADMIN_PASSWORD
sentinel down-after-milliseconds $SENTINEL_MASTER 5000
CONF
  redis-server "$dir/sentinel.conf" --sentinel "${REDIS_TLS[@]}"
  wait_port "$SENTINEL_PORT" "Redis Sentinel" 20
  local i=0
  until rcli -p "$SENTINEL_PORT" sentinel get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | grep "$REDIS_PORT" >/dev/null; do
    i=$((i + 1)); [ "$i" -le 30 ] || die "Redis Sentinel does not know the primary"
    sleep 1
  done
  log "Redis Sentinel started on $SENTINEL_PORT (master $SENTINEL_MASTER)"
}
# The primary's port, as Sentinel knows it; the other port of the pair; the
# directory (primary, replica) of the server on a port.
redis_primary_port() { rcli -p "$SENTINEL_PORT" sentinel get-master-addr-by-name "$SENTINEL_MASTER" | sed -n 2p; }
redis_other_port() { if [ "$1" = "$REDIS_PORT" ]; then echo "$REPLICA_PORT"; else echo "$REDIS_PORT"; fi; }
redis_name_of() { if [ "$1" = "$REDIS_PORT" ]; then echo primary; else echo replica; fi; }
redis_await_primary() { # <port> <seconds>: Sentinel names it, and it says so itself
  local i=0
  until [ "$(redis_primary_port 2>/dev/null)" = "$1" ] && rcli -p "$1" info replication 2>/dev/null | grep 'role:master' >/dev/null; do
    i=$((i + 1)); [ "$i" -le "$2" ] || die "Redis on $1 did not become the primary within ${2}s"
    sleep 1
  done
}
redis_await_replica() { # <port> <seconds>: in sync, and Sentinel counts it a healthy replica
  local i=0
  until rcli -p "$1" info replication 2>/dev/null | grep 'master_link_status:up' >/dev/null &&
    rcli -p "$SENTINEL_PORT" sentinel replicas "$SENTINEL_MASTER" 2>/dev/null |
      awk -v port="$1" 'prev == "port" && $0 == port {p = 1} prev == "flags" && p {print; exit} {prev = $0}' | grep -x slave >/dev/null; do
    i=$((i + 1)); [ "$i" -le "$2" ] || die "Redis on $1 did not become a healthy replica within ${2}s"
    sleep 1
  done
}
# cmd_redis_home: the primary back on $REDIS_PORT after redis-failover
# faults, by a Sentinel failover of the idle pair (no client writing, so
# nothing to lose); nothing to do when it is there.
cmd_redis_home() {
  local cur
  cur=$(redis_primary_port)
  [ "$cur" = "$REDIS_PORT" ] && { log "Redis primary is on $REDIS_PORT"; return 0; }
  redis_await_replica "$REDIS_PORT" 60
  rcli -p "$SENTINEL_PORT" sentinel failover "$SENTINEL_MASTER" >/dev/null
  redis_await_primary "$REDIS_PORT" 60
  redis_await_replica "$REPLICA_PORT" 60
  log "Redis primary back on $REDIS_PORT (replica $REPLICA_PORT)"
}
redis_down() {
  local f
  for f in "$STACK_DIR"/redis/*/redis.pid; do
    [ -f "$f" ] || continue
    # TERM, then wait for the exit (stop_pid): a node still writing its
    # last log line would race the removal of its directory below.
    if pid_alive "$f"; then stop_pid "$(cat "$f")" "Redis $(basename "$(dirname "$f")")" && log "Redis $(basename "$(dirname "$f")") stopped"; fi
    rm -f "$f"
  done
  rm -rf "$STACK_DIR"/redis/cluster-*  # cluster membership is re-formed on every up
}

# ---------------------------------------------------------------- RocketMQ
rmq_up() {
  "$RMQ" fetch
  "$RMQ" start
  "$RMQ" ensure "$RMQ_RESOURCES"
}
rmq_down() { [ -d "$RMQ_RUN_DIR" ] && "$RMQ" stop || true; }

# ---------------------------------------------------------------- envtest
# Every Kubernetes binary — kube-apiserver and etcd for envtest, the rest for
# the cluster (hack/cluster.sh) — is built from Go modules in one go build
# (hack/k8s-build.sh; ~10 min on 2 cores the first time, seconds once
# cached). The build runs in its own process group beside the rest of "up",
# so a failing "up" or "down" stops all of it; the build script takes a lock,
# so two never run at once, and an "up" that finds one running waits for it.
ENVTEST_PID="$STACK_DIR/envtest-build.pid"
ENVTEST_LOG="$STACK_DIR/envtest-build.log"
envtest_start() { # [idle]: at idle CPU priority (beside the tests), else nice 10
  pid_alive "$ENVTEST_PID" && return 0
  local prio=(nice -n 10)
  [ "${1:-}" = idle ] && prio=(chrt --idle 0 nice -n 19)
  setsid "${prio[@]}" "$ROOT/hack/k8s-build.sh" "$STACK_DIR/k8s" > "$ENVTEST_LOG" 2>&1 < /dev/null &
  echo $! > "$ENVTEST_PID"
}
envtest_stop() {
  pid_alive "$ENVTEST_PID" || { rm -f "$ENVTEST_PID"; return 0; }
  local pid; pid=$(cat "$ENVTEST_PID")
  kill -TERM -- "-$pid" 2>/dev/null || true
  local i=0
  while running "$pid" && [ "$i" -lt 20 ]; do sleep 0.5; i=$((i + 1)); done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$ENVTEST_PID"
  log "stopped the Kubernetes build (pid $pid)"
}
# envtest_wait: wait for the build, saying every 30 s what it is doing, how
# long is left (hack/k8s-build.sh's own estimate from its progress) and what
# can be tried meanwhile.
envtest_wait() {
  local pid t0=$SECONDS next=$((SECONDS + 5)) rc=0 now hinted=""
  pid=$(cat "$ENVTEST_PID" 2>/dev/null) || return 0
  while running "$pid"; do
    if [ "$SECONDS" -ge "$next" ]; then
      now=$(cat "$STACK_DIR/k8s/.build-progress" 2>/dev/null || grep '^\[k8s-build' "$ENVTEST_LOG" | tail -n 1 | cut -d']' -f2-)
      log "building Kubernetes from Go modules, first time only (${now# }); waited $((SECONDS - t0))s"
      if [ -z "$hinted" ]; then
        log "meanwhile, in another shell: make demo-processes — the same sale as processes on this stack, no Kubernetes (about a minute)"
        hinted=1
      fi
      next=$((SECONDS + 30))
    fi
    sleep 1
  done
  wait "$pid" 2>/dev/null || rc=$?
  rm -f "$ENVTEST_PID"
  if [ "$rc" != 0 ] || [ ! -s "$STACK_DIR/k8s/VERSIONS" ]; then
    tail -n 30 "$ENVTEST_LOG" >&2
    die "building Kubernetes failed (log: $ENVTEST_LOG)"
  fi
  log "Kubernetes binaries: $(tr '\n' ' ' < "$STACK_DIR/k8s/VERSIONS")"
}

write_env() {
  cat > "$ENV_FILE.tmp" <<EOF
# Written by hack/stack.sh up; read by the tests and the demo (and sourced by
# hack/*.sh: a value with a shell character is single-quoted).
SECKILL_PG_DSN='postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/seckill?sslmode=verify-full&sslrootcert=$TLS_DIR/ca.crt'
SECKILL_PG_ADMIN_DSN='postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres?sslmode=verify-full&sslrootcert=$TLS_DIR/ca.crt'
SECKILL_TLS_CA=$TLS_DIR/ca.crt
SECKILL_RMQ_CA_FILE=$TLS_DIR/ca.crt
SECKILL_REDIS_CA_FILE=$TLS_DIR/ca.crt
SECKILL_REDIS_ADDR=127.0.0.1:$REDIS_PORT
SECKILL_REDIS_ADDRS=127.0.0.1:$REDIS_PORT
SECKILL_REDIS_USERNAME=$REDIS_USER
SECKILL_REDIS_PASSWORD=$REDIS_PASSWORD
SECKILL_REDIS_ADMIN_PASSWORD=$REDIS_ADMIN_PASSWORD
SECKILL_REDIS_REPLICA_ADDR=127.0.0.1:$REPLICA_PORT
SECKILL_REDIS_SENTINEL_ADDR=127.0.0.1:$SENTINEL_PORT
SECKILL_REDIS_SENTINEL_MASTER=$SENTINEL_MASTER
SECKILL_REDIS_CLUSTER_ADDRS=127.0.0.1:$CLUSTER_PORT,127.0.0.1:$((CLUSTER_PORT + 1)),127.0.0.1:$((CLUSTER_PORT + 2))
SECKILL_RMQ_ENDPOINT=127.0.0.1:$RMQ_GRPC_PORT
SECKILL_RMQ_ACCESS_KEY=$RMQ_USER
SECKILL_RMQ_SECRET_KEY=$RMQ_PASSWORD
SECKILL_RMQ_NAMESRV=127.0.0.1:$RMQ_NAMESRV_PORT
KUBEBUILDER_ASSETS=$STACK_DIR/k8s
EOF
  mv "$ENV_FILE.tmp" "$ENV_FILE"
}

STEP=""
on_up_exit() {
  local rc=$?
  [ "$rc" = 0 ] && return 0
  envtest_stop
  log "stack up FAILED while ${STEP:-starting}. What is already running stays up and is reused."
  log "Fix the cause shown above, then retry with: make stack-up   (a clean start: make stack-down stack-up)"
}

cmd_up() {
  local with_envtest=1 background=""
  case "${1:-}" in
    --no-envtest) with_envtest=0 ;;
    --k8s-background) background=idle ;;
    "") ;;
    *) die "up takes no argument but --no-envtest or --k8s-background" ;;
  esac
  mkdir -p "$STACK_DIR"
  exec 9> "$STACK_DIR/.lock"
  flock -n 9 || { log "another hack/stack.sh is running here; waiting for it"; flock 9; }
  trap on_up_exit EXIT
  local t0=$SECONDS
  # "9>&-": the servers started below must not inherit the lock.
  if [ "$with_envtest" = 1 ]; then
    STEP="starting the Kubernetes build"; envtest_start "$background" 9>&-
  fi
  STEP="installing packages"; install_packages 9>&-
  STEP="starting PostgreSQL"; pg_up 9>&-
  STEP="starting Redis"; redis_up 9>&-
  STEP="starting RocketMQ"; rmq_up 9>&-
  write_env
  if [ -n "$background" ] && pid_alive "$ENVTEST_PID"; then
    log "Kubernetes builds in the background at idle priority (log $ENVTEST_LOG); the envtest suite and hack/cluster.sh up wait for it"
  elif [ "$with_envtest" = 1 ]; then
    # The servers are up: another "up" (make demo-processes, say) may go on
    # while this one waits for the build.
    flock -u 9
    STEP="building Kubernetes (envtest and the cluster)"; envtest_wait
  fi
  log "stack is up after $((SECONDS - t0))s$([ "$with_envtest" = 1 ] || echo ' (without envtest)'); endpoints in $ENV_FILE:"
  grep -v '^#' "$ENV_FILE" >&2
}

cmd_down() {
  mkdir -p "$STACK_DIR"
  exec 9> "$STACK_DIR/.lock"
  flock -w 60 9 || log "another hack/stack.sh holds the lock; stopping anyway"
  envtest_stop
  rmq_down
  redis_down
  pg_down
  # Anything of ours without a pid file (a leftover of a crashed run).
  local p left
  for p in $(our_pids); do
    log "stopping leftover pid $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-100)"
    stop_pid "$p"
  done
  left=$(our_pids)
  [ -z "$left" ] || die "still running after down: $left"
  log "stack is down: no process of ours is running"
}

cmd_status() {
  local data="$PG_DIR/data" f rc=0
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1 && echo "postgresql: up ($PG_PORT)" || { echo "postgresql: down"; rc=1; }
  for f in primary replica sentinel cluster-0 cluster-1 cluster-2; do
    pid_alive "$STACK_DIR/redis/$f/redis.pid" && echo "redis $f: up (pid $(cat "$STACK_DIR/redis/$f/redis.pid"))" || { echo "redis $f: down"; rc=1; }
  done
  pid_alive "$RMQ_RUN_DIR/namesrv.pid" && echo "rocketmq namesrv: up ($RMQ_NAMESRV_PORT)" || { echo "rocketmq namesrv: down"; rc=1; }
  pid_alive "$RMQ_RUN_DIR/proxy.pid" && echo "rocketmq broker+proxy: up (gRPC $RMQ_GRPC_PORT)" || { echo "rocketmq broker+proxy: down"; rc=1; }
  if pid_alive "$ENVTEST_PID"; then echo "envtest: building (pid $(cat "$ENVTEST_PID"), log $ENVTEST_LOG)"
  elif [ -f "$STACK_DIR/k8s/VERSIONS" ]; then echo "envtest: $(tr '\n' ' ' < "$STACK_DIR/k8s/VERSIONS")"
  else echo "envtest: not built"; fi
  return "$rc"
}

# cmd_fault <broker-restart|pg-freeze> <seconds>: a fault on the running
# stack, for a sale under load (make bench-sale FAULT=…): the broker+proxy
# stopped and started again, or every PostgreSQL process frozen (SIGSTOP)
# and thawed (SIGCONT) — connections stay open, nothing answers.
cmd_fault() {
  local kind="${1:-}" secs="${2:-10}"
  [[ "$secs" =~ ^[0-9]+$ ]] || die "fault: seconds must be a whole number, got $secs"
  case "$kind" in
    broker-restart)
      "$RMQ" stop-broker
      sleep "$secs"
      "$RMQ" start ;;
    pg-freeze)
      local data="$PG_DIR/data" pm pids
      [ -f "$data/postmaster.pid" ] || die "fault: PostgreSQL is not running"
      pm=$(head -1 "$data/postmaster.pid")
      pids="$pm $(pgrep -P "$pm" | tr '\n' ' ')"
      # shellcheck disable=SC2086 # a list of pids
      kill -STOP $pids
      log "PostgreSQL frozen for ${secs}s (pids $pids)"
      sleep "$secs"
      # shellcheck disable=SC2086
      kill -CONT $pids
      log "PostgreSQL thawed" ;;
    pg-restart-fast|pg-restart-immediate)
      # Every connection cut; -m immediate also skips the checkpoint (crash
      # recovery on start). The server is down for $secs seconds.
      local data="$PG_DIR/data"
      runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -m "${kind#pg-restart-}" -w stop >/dev/null
      log "PostgreSQL stopped (-m ${kind#pg-restart-}) for ${secs}s"
      sleep "$secs"
      runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$data" -l "$PG_DIR/server.log" -w -t 60 start >/dev/null
      log "PostgreSQL started" ;;
    redis-freeze)
      # The primary stops answering (SIGSTOP): every client times out, and
      # what it sent meanwhile has an unknown outcome. No data is lost (the
      # stack's Redis keeps no files: a kill would lose the stock).
      local pid
      pid=$(cat "$STACK_DIR/redis/primary/redis.pid")
      kill -STOP "$pid"
      log "Redis primary frozen for ${secs}s (pid $pid)"
      sleep "$secs"
      kill -CONT "$pid"
      log "Redis primary thawed" ;;
    redis-failover)
      # The primary SIGKILLed (design.md#faults row 13): Sentinel sees it down
      # (down-after 5 s) and promotes the replica. What the primary had
      # acknowledged and the replica had not received is lost. The killed
      # server is started again $secs seconds after the promotion, empty, as
      # a replica of the new primary: the pair is whole for the next fault.
      # (The primary alternates between the two ports; redis-home puts it
      # back on $REDIS_PORT, where every other client expects it.)
      local old new name
      old=$(redis_primary_port)
      name=$(redis_name_of "$old")
      kill -KILL "$(cat "$STACK_DIR/redis/$name/redis.pid")"
      log "Redis primary ($name, $old) killed"
      new=$(redis_other_port "$old")
      redis_await_primary "$new" 60
      log "Sentinel promoted $(redis_name_of "$new") ($new)"
      sleep "$secs"
      redis_start "$name" "$old" --replicaof 127.0.0.1 "$new"
      redis_await_replica "$old" 60
      log "Redis $name ($old) is a replica of $new again" ;;
    *) die "fault: want broker-restart, pg-freeze, pg-restart-fast, pg-restart-immediate, redis-freeze or redis-failover, got '$kind'" ;;
  esac
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cat "$ENV_FILE" ;;
  fault) shift; cmd_fault "$@" ;;
  redis-home) cmd_redis_home ;;
  *) sed -n '2,28p' "$0"; exit 2 ;;
esac
