#!/usr/bin/env bash
# cluster.sh — a real single-node Kubernetes on this machine, built from the
# registries this project reaches, beside the local stack (hack/stack.sh).
#
#   hack/cluster.sh up       build (cached by version) and start everything; idempotent
#   hack/cluster.sh down     delete the pods, stop everything, undo every host change
#   hack/cluster.sh status   what runs
#   hack/cluster.sh image    rebuild the project's image and import it into the node
#   hack/cluster.sh env      KUBECONFIG=... for the shell
#
# Versions and why: one Kubernetes version for the control plane, the node
# and envtest, v1.34.4, with the etcd it is tested with (3.6.4) and helm
# v3.19.5 (the helm whose k8s.io modules are 1.34's): all of them compiled in
# one `go build` by hack/k8s-build.sh (run by hack/stack.sh up, which builds
# them for envtest) into .stack/k8s, cached by version. Why 1.34: the kubelet
# from 1.36 on needs containerd 2.x, and Debian 12 ships containerd 1.6.20
# (with runc 1.1.5), which a 1.34 kubelet runs with; the newest Kubernetes
# would need containerd 2.x built from its Go module as well, a longer cold
# path to the same working cluster.
# containerd, runc, the CNI plugins (bridge, host-local, loopback, portmap),
# iptables and conntrack are Debian packages. The pause image is built from
# kubernetes' own pause.c (gcc -static), the project's image from the static
# binaries with go-containerregistry (hack/image); both are imported into
# containerd's k8s.io namespace.
#
# Network, all on this machine: etcd, the controller manager and the
# scheduler on 127.0.0.1; the node is the bridge seckill0 (10.244.0.1/24),
# where the API server listens too (pods reach it through the kubernetes
# Service, whose endpoint it keeps as its advertise address); pods get 10.244.0.0/24, services
# 10.96.0.0/16 (routed to the bridge); no masquerade to the outside (the
# bridge plugin runs with ipMasq false; kube-proxy masquerades only service
# traffic onto the bridge). The stack's servers are reached from pods at
# 10.244.0.1 through hack/forward. Nodes are addressed by InternalIP; no DNS.
#
# Host changes made by the kubelet, kube-proxy and the CNI plugins, undone by
# down: sysctls (recorded before up), iptables chains KUBE-*, the bridge, the
# service route, cgroups kubepods, kubelet mounts, /var/lib/kubelet etc.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.stack/cluster"
BIN="$DIR/bin"
LOGS="$DIR/logs"
PKI="$DIR/pki"
KUBECONFIG_FILE="$DIR/kubeconfig"
LOG_TAG=cluster
OWN_DIRS="$DIR"
# shellcheck source=lib.sh
source "$ROOT/hack/lib.sh"

K8S="$ROOT/.stack/k8s"   # every Kubernetes binary, etcd and helm (hack/k8s-build.sh)
NODE_NAME="seckill-node"
BRIDGE="seckill0"
NODE_IP="10.244.0.1"
POD_CIDR="10.244.0.0/24"
SVC_CIDR="10.96.0.0/16"
ETCD_PORT=12379
APISERVER_PORT=16443
IMAGE_REPO="localhost/seckill"
PAUSE_IMAGE="localhost/pause:3.10"
SYSCTLS="net.ipv4.ip_forward vm.overcommit_memory kernel.panic kernel.panic_on_oops net.bridge.bridge-nf-call-iptables"
# The stack's ports that pods reach through the node's bridge address.
STACK_PORTS="${SECKILL_PG_PORT:-25432},${SECKILL_REDIS_PORT:-26379},${SECKILL_RMQ_GRPC_PORT:-28081},${SECKILL_RMQ_NAMESRV_PORT:-29876}"

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# write FILE < content: replaces FILE only when the content differs (a
# running kube-proxy exits when its configuration file changes).
write() {
  local tmp="$1.new.$$"
  cat > "$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}

# ------------------------------------------------------------------ builds
install_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build_binaries() {
  # Built by hack/stack.sh up (envtest); here only when the stack was
  # started without it. Seconds when cached.
  nice -n 10 "$ROOT/hack/k8s-build.sh" "$K8S"
  local c
  for c in kube-controller-manager kube-scheduler kubectl kubelet kube-proxy helm; do
    cmp -s "$K8S/$c" "$BIN/$c" 2>/dev/null || { mkdir -p "$BIN" && cp "$K8S/$c" "$BIN/$c.tmp" && mv -f "$BIN/$c.tmp" "$BIN/$c"; }
  done
  if [ ! -x "$BIN/forward" ] || [ "$ROOT/hack/forward/main.go" -nt "$BIN/forward" ]; then
    (cd "$ROOT" && CGO_ENABLED=0 go build -o "$BIN/forward" ./hack/forward)
  fi
}

# pause image: kubernetes' own pause.c from the module the node was built
# from, static.
build_pause() {
  local out="$DIR/images/pause.tar" src
  [ -f "$out" ] && return 0
  local version
  version=$(awk '$1 == "Kubernetes" { print $2 }' "$K8S/VERSIONS")
  src="$(GOFLAGS=-mod=mod go env GOMODCACHE)/k8s.io/kubernetes@$version/build/pause/linux/pause.c"
  [ -f "$src" ] || (cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@$version" >/dev/null)
  [ -f "$src" ] || die "no pause.c in k8s.io/kubernetes@$version"
  mkdir -p "$DIR/images"
  gcc -Os -static -DVERSION="$version" -o "$DIR/images/pause" "$src"
  (cd "$ROOT" && CGO_ENABLED=0 go run ./hack/image -out "$out.tmp" -name "$PAUSE_IMAGE" -file "$DIR/images/pause:/pause" -entrypoint /pause -user 65535:65535 >/dev/null)
  mv "$out.tmp" "$out"
}

# The project's image is tagged by the digest of its two binaries
# (localhost/seckill:dev-<12 hex>, written to images/seckill.ref): a changed
# binary is a new tag, so `helm upgrade` and the activities roll their pods
# instead of keeping a cached image of the same name.
build_image() {
  mkdir -p "$DIR/images"
  # One go build for both, static, with the build configuration of the
  # Makefile (CGO_ENABLED=0, no -trimpath): the packages the tests and the
  # demo compiled are reused, not compiled again.
  (cd "$ROOT" && CGO_ENABLED=0 go build -ldflags "-s -w" -o "$DIR/images/" . ./workloads/cmd/seckill) \
    || die "building the image's binaries failed"
  local ref
  ref="$IMAGE_REPO:dev-$(cat "$DIR/images/seckill-operator" "$DIR/images/seckill" | sha256sum | cut -c1-12)"
  (cd "$ROOT" && CGO_ENABLED=0 go run ./hack/image -out "$DIR/images/seckill.tar" -name "$ref" \
    -file "$DIR/images/seckill-operator:/seckill-operator" -file "$DIR/images/seckill:/seckill" -entrypoint /seckill-operator) \
    || die "writing the image failed"
  echo "$ref" > "$DIR/images/seckill.ref"
}

import_images() { # [tar...]: default the pause image and the project's
  local sock="$DIR/run/containerd/containerd.sock" f
  [ $# -gt 0 ] || set -- "$DIR/images/pause.tar" "$DIR/images/seckill.tar"
  for f in "$@"; do
    [ -f "$f" ] && ctr --address "$sock" -n k8s.io images import --no-unpack=false "$f" >/dev/null
  done
  log "images imported: $PAUSE_IMAGE $(cat "$DIR/images/seckill.ref" 2>/dev/null)"
}

# ------------------------------------------------------------------ PKI
pki() {
  [ -f "$PKI/admin.crt" ] && return 0
  mkdir -p "$PKI" && cd "$PKI"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=seckill-local-ca" 2>/dev/null
  cert() { # name subject [san]
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\n' "$3" > "$1.ext"; else : > "$1.ext"; fi
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$1.ext" 2>/dev/null
  }
  cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.96.0.1,IP:$NODE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  cert admin "/O=system:masters/CN=seckill-admin"
  cert kubelet "/CN=$NODE_NAME" "IP:$NODE_IP"
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  cd "$ROOT"
}

kubeconfig() {
  write "$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: seckill
  cluster: {server: "https://$NODE_IP:$APISERVER_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$PKI/admin.crt", client-key: "$PKI/admin.key"}
contexts:
- name: seckill
  context: {cluster: seckill, user: admin}
current-context: seckill
EOF
}

# ------------------------------------------------------------------ host
record_host() {
  [ -f "$DIR/host-before" ] && return 0
  local s
  for s in $SYSCTLS; do
    printf '%s=%s\n' "$s" "$(sysctl -n "$s" 2>/dev/null || echo absent)"
  done > "$DIR/host-before"
}

network_up() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
  fi
  ip addr replace "$NODE_IP/24" dev "$BRIDGE"  # idempotent: no check-then-add
  ip link set "$BRIDGE" up
  ip route replace "$SVC_CIDR" dev "$BRIDGE" src "$NODE_IP"
  mkdir -p "$DIR/cni/net.d" "$DIR/cni/ipam"
  write "$DIR/cni/net.d/10-seckill.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "seckill", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$DIR/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
}

network_down() {
  ip route del "$SVC_CIDR" dev "$BRIDGE" 2>/dev/null || true
  ip link del "$BRIDGE" 2>/dev/null || true
  # Pod veths left behind go with their namespaces; the CNI IPAM store too.
  rm -rf "$DIR/cni/ipam"
}

iptables_clean() {
  local t c ipt
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for t in filter nat mangle; do
      # Jumps into KUBE-* chains from the built-in chains, then the chains.
      "$ipt" -t "$t" -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' | sed 's/^-A/-D/' |
        while read -r rule; do eval "$ipt -t $t $rule" 2>/dev/null || true; done || true
      for c in $("$ipt" -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
        "$ipt" -t "$t" -F "$c" 2>/dev/null || true
      done
      for c in $("$ipt" -t "$t" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
        "$ipt" -t "$t" -X "$c" 2>/dev/null || true
      done
    done
  done
}

restore_host() {
  local kv
  if [ -f "$DIR/host-before" ]; then
    while IFS= read -r kv; do
      [ "${kv#*=}" = absent ] && continue
      sysctl -qw "$kv" >/dev/null 2>&1 || true
    done < "$DIR/host-before"
    rm -f "$DIR/host-before"
  fi
  local m
  for m in $(awk '{print $2}' /proc/mounts | grep -E "^$DIR/(kubelet|containerd)" | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  local ctrl
  for ctrl in /sys/fs/cgroup/*/; do
    [ -d "$ctrl/kubepods" ] && find "$ctrl/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  rm -rf /var/lib/kubelet/device-plugins /var/log/pods /var/log/containers /usr/libexec/kubernetes/kubelet-plugins /run/containerd/runc/k8s.io
  rmdir /var/lib/kubelet /usr/libexec/kubernetes 2>/dev/null || true
}

# advertise IP: the stack's RocketMQ proxy hands pods (and everyone) this
# route endpoint; 127.0.0.1 is unreachable from a pod.
advertise() {
  local run="$ROOT/.stack/rocketmq"
  if [ -f "$run/proxy.pid" ] || [ "$1" != 127.0.0.1 ]; then
    RMQ_RUN_DIR="$run" "$ROOT/hack/rocketmq/rmq.sh" advertise "$1" 9>&-
  fi
}

# ------------------------------------------------------------------ daemons
start() { # name cmd... : start in the background unless running
  local name="$1"; shift
  if pid_alive "$DIR/$name.pid"; then
    return 0
  fi
  mkdir -p "$LOGS"
  (cd "$DIR" && exec setsid "$@" >> "$LOGS/$name.log" 2>&1 9>&-) &
  echo $! > "$DIR/$name.pid"
  log "started $name (pid $!)"
}

wait_for() { # what seconds command...
  local what="$1" max="$2" i=0; shift 2
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1)); [ "$i" -le "$((max * 2))" ] || die "$what not ready within ${max}s (logs: $LOGS)"
    sleep 0.5
  done
}

containerd_up() {
  mkdir -p "$DIR/containerd" "$DIR/run/containerd"
  write "$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$DIR/run/containerd/containerd.sock"
[ttrpc]
  address = "$DIR/run/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
EOF
  start containerd containerd --config "$DIR/containerd/config.toml"
  wait_for containerd 30 ctr --address "$DIR/run/containerd/containerd.sock" version
}

control_plane_up() {
  start etcd "$K8S/etcd" --data-dir "$DIR/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 1))" \
    --quota-backend-bytes 1073741824
  start kube-apiserver "$K8S/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range "$SVC_CIDR" \
    --authorization-mode Node,RBAC --kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
    --kubelet-preferred-address-types InternalIP --allow-privileged=false
  wait_for kube-apiserver 90 kubectl get --raw /readyz
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG_FILE" --bind-address 127.0.0.1 \
    --secure-port 10357 --leader-elect=false --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --use-service-account-credentials=false --cluster-cidr "$POD_CIDR" --service-cluster-ip-range "$SVC_CIDR" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key"
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$KUBECONFIG_FILE" --bind-address 127.0.0.1 --secure-port 10359 --leader-elect=false
}

node_up() {
  mkdir -p "$DIR/kubelet/root" "$DIR/kubelet/pki"
  write "$DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$DIR/run/containerd/containerd.sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {}
podCIDR: $POD_CIDR
maxPods: 60
serializeImagePulls: false
EOF
  start kubelet "$BIN/kubelet" --config "$DIR/kubelet/config.yaml" --kubeconfig "$KUBECONFIG_FILE" \
    --root-dir "$DIR/kubelet/root" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --cert-dir "$DIR/kubelet/pki"
  wait_for "node $NODE_NAME Ready" 120 node_ready
  write "$DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$KUBECONFIG_FILE"}
hostnameOverride: $NODE_NAME
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $POD_CIDR
mode: iptables
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0}
EOF
  start kube-proxy "$BIN/kube-proxy" --config "$DIR/kube-proxy.yaml"
}

node_ready() {
  kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -x True >/dev/null
}

# ------------------------------------------------------------------ commands
cmd_up() {
  mkdir -p "$DIR"
  exec 9> "$DIR/.lock"
  flock 9
  [ "$(id -u)" = 0 ] || die "the node (kubelet, containerd, bridge) needs root"
  local t0=$SECONDS
  install_packages
  build_binaries
  build_pause
  # The project's image compiles while the node starts (the control plane
  # and the kubelet mostly wait), and is imported once both are done.
  local image_pid=""
  if [ ! -f "$DIR/images/seckill.ref" ]; then
    mkdir -p "$LOGS"
    build_image > "$LOGS/image-build.log" 2>&1 9>&- &
    image_pid=$!
  fi
  pki
  kubeconfig
  record_host
  network_up
  advertise "$NODE_IP"
  containerd_up
  if [ -n "$image_pid" ]; then import_images "$DIR/images/pause.tar"; else import_images; fi
  control_plane_up
  node_up
  # Only what listens on loopback alone needs relaying (the RocketMQ proxy
  # listens on every address).
  local p fwd=()
  for p in ${STACK_PORTS//,/ }; do
    ss -Htln "sport = :$p" | awk '{print $4}' | grep -E '^(\*|0\.0\.0\.0|\[::\]):' >/dev/null || fwd+=("$p")
  done
  if [ ${#fwd[@]} -gt 0 ]; then
    start forward "$BIN/forward" -listen "$NODE_IP" -to 127.0.0.1 -ports "$(IFS=,; echo "${fwd[*]}")"
  fi
  kubectl label node "$NODE_NAME" node-role.kubernetes.io/seckill= --overwrite >/dev/null
  if [ -n "$image_pid" ]; then
    wait "$image_pid" || { cat "$LOGS/image-build.log" >&2; die "building the project's image failed (log: $LOGS/image-build.log)"; }
    import_images "$DIR/images/seckill.tar"
  fi
  log "up in $((SECONDS - t0))s: KUBECONFIG=$KUBECONFIG_FILE (node $NODE_NAME at $NODE_IP; the stack at $NODE_IP:{$STACK_PORTS} from pods)"
}

cmd_down() {
  mkdir -p "$DIR"
  exec 9> "$DIR/.lock"
  flock 9
  if pid_alive "$DIR/kube-apiserver.pid" && pid_alive "$DIR/kubelet.pid"; then
    # Pods first, so that their shims exit and nothing keeps mounts.
    kubectl delete namespace --all --wait=false >/dev/null 2>&1 || true
    kubectl delete pods --all --all-namespaces --grace-period=0 --force >/dev/null 2>&1 || true
    local i
    for i in $(seq 1 60); do
      [ -z "$(ctr --address "$DIR/run/containerd/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local n
  for n in forward kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
    if pid_alive "$DIR/$n.pid"; then
      stop_pid "$(cat "$DIR/$n.pid")" "$n"
      log "stopped $n"
    fi
    rm -f "$DIR/$n.pid"
  done
  # Shims and containers left by a killed containerd.
  local p
  for p in $(pgrep -f "containerd-shim.*$DIR" || true) $(pgrep -f "^/pause$" || true); do
    kill -KILL "$p" 2>/dev/null || true
  done
  if [ -x "$BIN/kube-proxy" ]; then "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  iptables_clean
  advertise 127.0.0.1
  network_down
  restore_host
  rm -rf "$DIR/etcd" "$DIR/kubelet/root" "$DIR/containerd/state"
  log "down: nothing of the cluster runs; host changes undone"
}

cmd_status() {
  local n
  for n in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy forward; do
    if pid_alive "$DIR/$n.pid"; then echo "$n: running (pid $(cat "$DIR/$n.pid"))"; else echo "$n: stopped"; fi
  done
  if pid_alive "$DIR/kube-apiserver.pid"; then kubectl get nodes -o wide 2>/dev/null || true; fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  image) build_image; pid_alive "$DIR/containerd.pid" && import_images ;;
  env) echo "KUBECONFIG=$KUBECONFIG_FILE" ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
