#!/usr/bin/env bash
# rmq.sh — a real Apache RocketMQ 5 (namesrv + broker with the gRPC proxy in
# Local mode) from the Apache jars on Maven Central, for the local stack.
#
#   rmq.sh fetch                        mvn copies the jars into the cache (once per version)
#   rmq.sh start                        namesrv, then broker+proxy; waits until both answer
#   rmq.sh topic  <name> <NORMAL|DELAY|FIFO|TRANSACTION> [queues]
#   rmq.sh group  <name> <retryMaxTimes>
#   rmq.sh admin  <mqadmin sub-command and args>   (-n is added)
#   rmq.sh stop                         stops what start started (pid files)
#   rmq.sh stop-broker                  stops only broker+proxy (a broker restart: stop-broker, start)
#
# Environment: RMQ_RUN_DIR (required: where store, logs and pid files live),
# RMQ_VERSION (5.5.0), RMQ_CACHE (~/.cache/seckill), RMQ_NAMESRV_PORT, RMQ_BROKER_PORT
# (also uses -2 and +1), RMQ_GRPC_PORT, RMQ_REMOTING_PORT, JAVA, RMQ_START_TIMEOUT.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="${RMQ_VERSION:-5.5.0}"
CACHE="${RMQ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill}"
LIB="$CACHE/rocketmq-$VERSION/lib"
RUN="${RMQ_RUN_DIR:?RMQ_RUN_DIR must be set}"
NAMESRV_PORT="${RMQ_NAMESRV_PORT:-29876}"
BROKER_PORT="${RMQ_BROKER_PORT:-30911}"
GRPC_PORT="${RMQ_GRPC_PORT:-28081}"
REMOTING_PORT="${RMQ_REMOTING_PORT:-28080}"
NAMESRV_ADDR="127.0.0.1:$NAMESRV_PORT"
START_TIMEOUT="${RMQ_START_TIMEOUT:-180}"

if [ -z "${JAVA:-}" ]; then
  if [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
    JAVA=/usr/lib/jvm/java-17-openjdk-amd64/bin/java
  else
    JAVA=java
  fi
fi

log() { printf '[rocketmq] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# JDK 17 needs these module flags for the store's direct-buffer paths; the
# distribution scripts pass none. user.home redirects logs, store and kv config
# into the run directory; rocketmq.home.dir must be set or the servers exit(-2).
common_opts() {
  echo "-server -XX:+UseSerialGC -XX:-OmitStackTraceInFastThrow -XX:+IgnoreUnrecognizedVMOptions" \
       "--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED" \
       "--add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED" \
       "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED" \
       "-Duser.home=$RUN/home -Drocketmq.home.dir=$RUN/home -Dfile.encoding=UTF-8"
}

render() {
  sed -e "s#@RUN_DIR@#$RUN#g" -e "s#@NAMESRV_PORT@#$NAMESRV_PORT#g" -e "s#@BROKER_PORT@#$BROKER_PORT#g" \
      -e "s#@GRPC_PORT@#$GRPC_PORT#g" -e "s#@REMOTING_PORT@#$REMOTING_PORT#g" "$1"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

cmd_fetch() {
  if compgen -G "$LIB/rocketmq-proxy-$VERSION.jar" >/dev/null; then
    log "jars $VERSION already in $LIB"
    return 0
  fi
  command -v mvn >/dev/null || die "mvn is not installed (apt-get install maven)"
  local tmp="$LIB.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "fetching RocketMQ $VERSION jars from Maven Central"
  (cd "$HERE" && mvn -q -B dependency:copy-dependencies -Drocketmq.version="$VERSION" -Drmq.lib.dir="$tmp") \
    || die "mvn dependency:copy-dependencies failed"
  compgen -G "$tmp/rocketmq-proxy-$VERSION.jar" >/dev/null || die "fetch produced no rocketmq-proxy jar"
  rm -rf "$LIB" && mv "$tmp" "$LIB"
  log "jars in $LIB ($(ls "$LIB" | wc -l) files)"
}

wait_log() { # <logfile> <pattern> <name>
  local i=0
  while [ "$i" -lt "$START_TIMEOUT" ]; do
    grep -q "$2" "$1" 2>/dev/null && { log "$3 up after ${i}s"; return 0; }
    alive "$3" || { tail -n 40 "$1" >&2 || true; die "$3 exited during start-up (see $1)"; }
    sleep 1; i=$((i + 1))
  done
  die "$3 not ready after ${START_TIMEOUT}s (see $1)"
}

cmd_start() {
  compgen -G "$LIB/rocketmq-proxy-$VERSION.jar" >/dev/null || cmd_fetch
  mkdir -p "$RUN/home/conf" "$RUN/store"
  export ROCKETMQ_HOME="$RUN/home"
  if alive namesrv; then
    log "namesrv already running (pid $(cat "$RUN/namesrv.pid"))"
  else
    port_busy "$NAMESRV_PORT" && die "port $NAMESRV_PORT is in use by something else"
    render "$HERE/conf/namesrv.properties.template" > "$RUN/home/conf/namesrv.properties"
    # shellcheck disable=SC2046
    nohup "$JAVA" $(common_opts) -Xms128m -Xmx256m \
      -Drmq.logback.configurationFile=rmq.namesrv.logback.xml \
      -cp "$LIB/*" org.apache.rocketmq.namesrv.NamesrvStartup \
      -c "$RUN/home/conf/namesrv.properties" > "$RUN/namesrv.out" 2>&1 &
    echo $! > "$RUN/namesrv.pid"
    wait_log "$RUN/namesrv.out" "The Name Server boot success" namesrv
  fi
  if alive proxy; then
    log "broker+proxy already running (pid $(cat "$RUN/proxy.pid"))"
  else
    for p in "$BROKER_PORT" $((BROKER_PORT - 2)) $((BROKER_PORT + 1)) "$GRPC_PORT" "$REMOTING_PORT"; do
      port_busy "$p" && die "port $p is in use by something else"
    done
    local used
    used=$(df -P "$RUN/store" | awk 'NR==2 {gsub("%","",$5); print $5}')
    [ "${used:-0}" -lt 85 ] || log "WARNING: store partition ${used}% full; the broker refuses writes above 90%"
    render "$HERE/conf/broker.conf.template" > "$RUN/home/conf/broker.conf"
    render "$HERE/conf/rmq-proxy.json.template" > "$RUN/home/conf/rmq-proxy.json"
    # shellcheck disable=SC2046
    nohup "$JAVA" $(common_opts) -Xms256m -Xmx768m -XX:MaxDirectMemorySize=512m \
      -Drmq.logback.configurationFile=rmq.proxy.logback.xml \
      -cp "$LIB/*" org.apache.rocketmq.proxy.ProxyStartup \
      -pm local -n "$NAMESRV_ADDR" \
      -bc "$RUN/home/conf/broker.conf" -pc "$RUN/home/conf/rmq-proxy.json" > "$RUN/proxy.out" 2>&1 &
    echo $! > "$RUN/proxy.pid"
    wait_log "$RUN/proxy.out" "rocketmq-proxy startup successfully" proxy
  fi
  wait_registered
}

# The proxy reports "startup successfully" before the embedded broker has
# registered with the name server; topics and groups can only be created
# once the cluster is known there.
wait_registered() {
  local i=0
  until cmd_admin clusterList 2>/dev/null | grep -q "broker-a"; do
    i=$((i + 1)); [ "$i" -le 60 ] || die "broker not registered with the name server after 60 tries"
    alive proxy || die "proxy exited (see $RUN/proxy.out)"
    sleep 1
  done
  log "broker registered with the name server"
}

mqadmin() {
  # shellcheck disable=SC2046
  ROCKETMQ_HOME="$RUN/home" "$JAVA" $(common_opts) -Xms32m -Xmx256m -XX:TieredStopAtLevel=1 \
    -Drmq.logback.configurationFile=rmq.tools.logback.xml \
    -cp "$LIB/*" org.apache.rocketmq.tools.command.MQAdminStartup "$@"
}

cmd_admin() { local sub="$1"; shift; mqadmin "$sub" -n "$NAMESRV_ADDR" "$@"; }

cmd_topic() {
  local out
  out=$(cmd_admin updateTopic -c DefaultCluster -t "$1" -r "${3:-4}" -w "${3:-4}" -a "+message.type=$2" 2>&1) \
    || die "updateTopic $1: $out"
  grep -q "success" <<<"$out" || die "updateTopic $1: $out"
  log "topic $1 ($2)"
}

cmd_group() {
  local out
  out=$(cmd_admin updateSubGroup -c DefaultCluster -g "$1" -r "$2" 2>&1) || die "updateSubGroup $1: $out"
  grep -q "success" <<<"$out" || die "updateSubGroup $1: $out"
  log "group $1 (retryMaxTimes=$2)"
}

cmd_stop() { # [names...] (default: proxy namesrv)
  local f pid names=("$@")
  [ ${#names[@]} -gt 0 ] || names=(proxy namesrv)
  for f in "${names[@]}"; do
    [ -f "$RUN/$f.pid" ] || continue
    pid="$(cat "$RUN/$f.pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
      log "stopped $f (pid $pid)"
    fi
    rm -f "$RUN/$f.pid"
  done
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  start) cmd_start ;;
  stop)  cmd_stop ;;
  stop-broker) cmd_stop proxy ;;
  admin) shift; cmd_admin "$@" ;;
  topic) shift; cmd_topic "$@" ;;
  group) shift; cmd_group "$@" ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
