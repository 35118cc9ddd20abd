# hack/lib.sh — helpers shared by stack.sh and rocketmq/rmq.sh (sourced, not run).
#
# Ownership: a process is ours when its pid file says so, or when the process
# behind a port runs from (cwd) or names (cmdline) one of the directories we
# own (OWN_DIRS, set by the caller). "The port is busy" alone never decides.

LOG_TAG="${LOG_TAG:-stack}"
log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
die() { log "error: $*"; exit 1; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# running <pid>: alive and not a zombie (a killed daemon stays a zombie until
# init reaps it, and kill -0 succeeds on a zombie).
running() {
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
pid_alive() { [ -f "$1" ] && running "$(cat "$1")"; }

# port_pid <port>: the pid listening on the TCP port, if any (needs ss).
port_pid() {
  ss -Htlnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2
}

# proc_is_ours <pid>: true when the process runs from or names one of OWN_DIRS.
proc_is_ours() {
  local pid="$1" cwd cmd d
  cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null || true)
  cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)
  for d in ${OWN_DIRS:-}; do
    case "$cwd/" in "$d"/*) return 0 ;; esac
    case "$cmd" in *"$d"*) return 0 ;; esac
  done
  return 1
}

# stop_pid <pid> [name]: TERM, wait up to 30 s, then KILL.
stop_pid() {
  local pid="$1" i
  running "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 60); do running "$pid" || return 0; sleep 0.5; done
  kill -KILL "$pid" 2>/dev/null || true
  log "${2:-pid $pid} did not stop on TERM within 30s: killed"
}

# claim_port <port> <what>: make sure we can listen on the port before starting
# a server there. A leftover of ours (its pid file lost) is stopped; anything
# else is named and refused.
claim_port() {
  local port="$1" what="$2" pid cmd
  port_busy "$port" || return 0
  pid=$(port_pid "$port")
  if [ -n "$pid" ] && proc_is_ours "$pid"; then
    log "port $port ($what) is held by a leftover of ours (pid $pid, no pid file): stopping it"
    stop_pid "$pid" "leftover pid $pid"
    return 0
  fi
  cmd=$( [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-120 || true)
  die "port $port ($what) is in use by another program${pid:+ (pid $pid: $cmd)}; stop it or choose other ports (see the top of hack/stack.sh)"
}

# our_pids: every live process that runs from or names one of OWN_DIRS, but
# never this script or its ancestors (a shell whose cwd is under .stack, say).
our_pids() {
  local p skip=" " q="${BASHPID:-$$}"
  while [ -n "$q" ] && [ "$q" != 0 ]; do
    skip+="$q "
    q=$(awk '/^PPid:/ {print $2}' "/proc/$q/status" 2>/dev/null || true)
  done
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    case "$skip" in *" $p "*) continue ;; esac
    running "$p" && proc_is_ours "$p" && echo "$p"
  done
  return 0
}
