#!/usr/bin/env bash
# k8s-build.sh — build Kubernetes commands from the Go module proxy (never a
# downloaded release), cached by version.
#
#   hack/k8s-build.sh VERSION OUT_DIR CMD...     e.g. v1.34.4 .stack/node kubelet kube-proxy
#
# Each CMD is k8s.io/kubernetes/cmd/CMD, built from a throwaway module that
# requires k8s.io/kubernetes@VERSION and replaces its staging repos (k8s.io/*
# at v0.0.0) with their published v0.<minor>.<patch> tags, with upstream's
# version stamps and GODEBUG defaults, static (CGO_ENABLED=0). The finished
# binaries are kept in $K8S_BUILD_CACHE/VERSION (default
# ~/.cache/seckill/k8s/VERSION); a command already there is copied, not
# rebuilt. One build per cache at a time (flock).
#
# Cost on 2 cores, cold: kubelet ~4 min; kube-controller-manager +
# kube-scheduler + kube-proxy + kubectl ~3 min more (module downloads ~15 s).
set -euo pipefail

VERSION=${1:?usage: k8s-build.sh VERSION OUT_DIR CMD...}
OUT_DIR=${2:?usage: k8s-build.sh VERSION OUT_DIR CMD...}
shift 2
[ $# -gt 0 ] || { echo "usage: k8s-build.sh VERSION OUT_DIR CMD..." >&2; exit 2; }
CACHE=${K8S_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill/k8s}/$VERSION

log() { printf '[k8s-build %s] %s\n' "$VERSION" "$*" >&2; }
die() { log "error: $*"; exit 1; }

export GOWORK=off CGO_ENABLED=0
mkdir -p "$OUT_DIR" "$CACHE"
OUT_DIR=$(cd "$OUT_DIR" && pwd)

exec 8> "$CACHE/.build.lock"
if ! flock -n 8; then
  log "another build is running on this cache; waiting for it"
  flock 8
fi

# has_version BIN: the binary reports VERSION (kubectl: "Client Version: ...").
has_version() {
  local out
  [ -x "$1" ] || return 1
  if [ "$(basename "$1")" = kubectl ]; then
    out=$("$1" version --client 2>/dev/null) || return 1
    grep -qF "Client Version: $VERSION" <<<"$out"
  else
    out=$("$1" --version 2>/dev/null) || return 1
    grep -qxF "Kubernetes $VERSION" <<<"$out"
  fi
}

install_file() { cp "$1" "$2.tmp.$$" && chmod 0755 "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"; }

missing=()
for c in "$@"; do
  if has_version "$OUT_DIR/$c"; then
    continue
  elif has_version "$CACHE/$c"; then
    install_file "$CACHE/$c" "$OUT_DIR/$c"
    log "$c: from the cache"
  else
    missing+=("$c")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/k8s-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
t0=$SECONDS
cd "$WORK"
go mod init k8s-build/throwaway >/dev/null 2>&1
staging="v0.${VERSION#v1.}"
gomod=$(go list -mod=mod -m -f '{{.GoMod}}' "k8s.io/kubernetes@$VERSION")
build_date=$(go list -mod=mod -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes@$VERSION")
go mod edit -require="k8s.io/kubernetes@$VERSION"
repos=$(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$gomod")
[ -n "$repos" ] || die "no k8s.io/* v0.0.0 requirements in $gomod"
for m in $repos; do go mod edit -replace="$m=$m@$staging"; done
while read -r kv; do go mod edit -godebug="$kv"; done < <(awk '$1 == "godebug" && NF == 2 { print $2 }' "$gomod")
pkgs=()
for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
log "downloading modules for ${missing[*]}"
go list -mod=mod -deps "${pkgs[@]}" >/dev/null
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$(cut -d. -f2 <<<"$VERSION")"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
log "compiling ${missing[*]} (the long part)"
mkdir -p "$WORK/bin"
go build -mod=mod -trimpath -ldflags "$ldflags" -o "$WORK/bin/" "${pkgs[@]}"
for c in "${missing[@]}"; do
  has_version "$WORK/bin/$c" || die "$c does not report $VERSION"
  install_file "$WORK/bin/$c" "$CACHE/$c"
  install_file "$CACHE/$c" "$OUT_DIR/$c"
done
log "built ${missing[*]} in $((SECONDS - t0))s"
