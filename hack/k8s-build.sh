#!/usr/bin/env bash
# k8s-build.sh — every Kubernetes binary this project runs, from the Go module
# proxy (never a downloaded release), in ONE `go build`, cached by version.
#
#   hack/k8s-build.sh OUT_DIR
#
# Builds, from one throwaway module that requires k8s.io/kubernetes@K8S_VERSION
# (its staging repos k8s.io/* v0.0.0 replaced with their published v0.<minor>
# tags), in a single `go build` invocation so that the packages they share
# (client-go, apimachinery, apiserver, grpc, etcd's client, ...) compile once:
#
#   kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy
#   etcd   go.etcd.io/etcd/server/v3 at the version kubernetes itself requires
#          (1.34.4 → 3.6.4, the etcd its release is tested with: its client
#          packages are the apiserver's own, already in the build)
#   helm   helm.sh/helm/v3 at HELM_VERSION, whose k8s.io/* are the same minor
#          (3.19.x → 0.34), so the replacements above serve it too
#
# One version for the control plane, the node and envtest. Why 1.34: the
# kubelet from 1.36 on needs containerd 2.x; Debian 12 ships containerd
# 1.6.20, which a 1.34 kubelet runs with. The other way (the newest
# Kubernetes with containerd 2.x built from its Go module) adds containerd's
# build to the cold path and a runc newer than Debian's; this one adds nothing.
#
# Version stamps as upstream's hack/lib/version.sh; static (CGO_ENABLED=0);
# GODEBUG defaults copied from kubernetes' go.mod. The finished binaries are
# kept in $K8S_BUILD_CACHE/K8S_VERSION (default ~/.cache/seckill/k8s/...); a
# binary already in OUT_DIR or the cache is not rebuilt. One build per cache at
# a time (flock). While compiling, OUT_DIR/.build-progress says how many
# packages are compiled of how many, and about how long is left (from the rate
# so far), for hack/stack.sh to print.
#
# Cost on 2 cores, cold (empty module and build caches): see the README's table.
set -euo pipefail

OUT_DIR=${1:?usage: k8s-build.sh OUT_DIR}
K8S_VERSION=${K8S_VERSION:-v1.34.4}
HELM_VERSION=${HELM_VERSION:-v3.19.5}
CACHE=${K8S_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill/k8s}/$K8S_VERSION
K8S_CMDS="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy"
ALL="$K8S_CMDS etcd helm"

log() { printf '[k8s-build %s] %s\n' "$K8S_VERSION" "$*" >&2; }
die() { log "error: $*"; exit 1; }

export GOWORK=off CGO_ENABLED=0
mkdir -p "$OUT_DIR" "$CACHE"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
PROGRESS="$OUT_DIR/.build-progress"

exec 8> "$CACHE/.build.lock"
if ! flock -n 8; then
  log "another build is running on this cache; waiting for it"
  flock 8
fi

# want BIN: the version line BIN must print.
want() {
  case "$1" in
    etcd) echo "etcd Version: ${ETCD_VERSION#v}" ;;
    helm) echo "version.BuildInfo{Version:\"$HELM_VERSION\"" ;;
    kubectl) echo "Client Version: $K8S_VERSION" ;;
    *) echo "Kubernetes $K8S_VERSION" ;;
  esac
}
# has_version FILE NAME: FILE reports the wanted version.
has_version() {
  local out
  [ -x "$1" ] || return 1
  case "$2" in
    kubectl) out=$("$1" version --client 2>/dev/null) ;;
    helm) out=$("$1" version 2>/dev/null) ;;
    *) out=$("$1" --version 2>/dev/null) ;;
  esac || return 1
  grep -qF -- "$(want "$2")" <<<"$out"
}
install_file() { cp "$1" "$2.tmp.$$" && chmod 0755 "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"; }

# etcd's version comes from kubernetes' go.mod; read it without a module.
gomod_of() { (cd "${TMPDIR:-/tmp}" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p'); }
K8S_GOMOD=$(gomod_of "k8s.io/kubernetes@$K8S_VERSION") || die "k8s.io/kubernetes@$K8S_VERSION is not on the module proxy"
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' "$K8S_GOMOD")
[ -n "$ETCD_VERSION" ] || die "k8s.io/kubernetes@$K8S_VERSION names no go.etcd.io/etcd/server/v3"

missing=()
for c in $ALL; do
  if has_version "$OUT_DIR/$c" "$c"; then
    continue
  elif has_version "$CACHE/$c" "$c"; then
    install_file "$CACHE/$c" "$OUT_DIR/$c"
  else
    missing+=("$c")
  fi
done
versions() {
  printf 'Kubernetes %s\netcd Version: %s\nhelm %s\n' "$K8S_VERSION" "${ETCD_VERSION#v}" "$HELM_VERSION" > "$OUT_DIR/VERSIONS"
}
if [ ${#missing[@]} -eq 0 ]; then
  versions
  log "all from the cache: $ALL"
  exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/k8s-build.XXXXXX")
ticker=""
trap '[ -n "$ticker" ] && kill "$ticker" 2>/dev/null; rm -rf "$WORK" "$PROGRESS"' EXIT
t0=$SECONDS
cd "$WORK"
go mod init k8s-build/throwaway >/dev/null 2>&1
staging="v0.${K8S_VERSION#v1.}"
build_date=$(go list -mod=mod -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes@$K8S_VERSION")
go mod edit -require="k8s.io/kubernetes@$K8S_VERSION" -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" \
  -require="helm.sh/helm/v3@$HELM_VERSION"
repos=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$K8S_GOMOD")
[ -n "$repos" ] || die "no k8s.io/* v0.0.0 requirements in $K8S_GOMOD"
for m in $repos; do go mod edit -replace="$m=$m@$staging"; done
while read -r kv; do go mod edit -godebug="$kv"; done < <(awk '$1 == "godebug" && NF == 2 { print $2 }' "$K8S_GOMOD")

pkgs=()
for c in "${missing[@]}"; do
  case "$c" in
    etcd) pkgs+=(go.etcd.io/etcd/server/v3) ;;
    helm) pkgs+=(helm.sh/helm/v3/cmd/helm) ;;
    *) pkgs+=("k8s.io/kubernetes/cmd/$c") ;;
  esac
done
log "downloading modules for ${missing[*]}"
go list -mod=mod -deps "${pkgs[@]}" > "$WORK/deps"
total=$(wc -l < "$WORK/deps")
log "modules ready after $((SECONDS - t0))s; compiling ${missing[*]} in one go build ($total packages)"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION")"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
ldflags+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"

# Progress: `go build -v` names each package as it is compiled (cache hits
# are not named), so the rate so far tells the time left.
: > "$WORK/compiled"
(
  c0=$SECONDS
  while sleep 10; do
    n=$(wc -l < "$WORK/compiled"); s=$((SECONDS - c0))
    if [ "$n" -gt 0 ]; then
      left=$(( s * (total - n) / n ))
      [ "$left" -lt 0 ] && left=0
      echo "compiling Kubernetes $K8S_VERSION: $n of ~$total packages in ${s}s, about $(( (left + 59) / 60 )) min left" > "$PROGRESS.tmp"
      mv -f "$PROGRESS.tmp" "$PROGRESS"
    fi
  done
) &
ticker=$!
mkdir -p "$WORK/bin"
tc=$SECONDS
rc=0
go build -v -mod=mod -trimpath -ldflags "$ldflags" -o "$WORK/bin/" "${pkgs[@]}" 2> >(tee "$WORK/compiled" | grep -v '^[a-zA-Z0-9_./-]*$' >&2) || rc=$?
kill "$ticker" 2>/dev/null || true; ticker=""
[ "$rc" = 0 ] || die "go build failed (rc $rc)"
[ -x "$WORK/bin/server" ] && mv "$WORK/bin/server" "$WORK/bin/etcd"  # go.etcd.io/etcd/server/v3 builds as "server"
for c in "${missing[@]}"; do
  has_version "$WORK/bin/$c" "$c" || die "$c does not report $(want "$c")"
  install_file "$WORK/bin/$c" "$CACHE/$c"
  install_file "$CACHE/$c" "$OUT_DIR/$c"
done
versions
log "built ${missing[*]} in $((SECONDS - t0))s (compiling $((SECONDS - tc))s, $(wc -l < "$WORK/compiled") packages)"
