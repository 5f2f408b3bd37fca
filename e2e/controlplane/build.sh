#!/usr/bin/env bash
# Builds the unmodified upstream control-plane binaries used by the e2e harness
# (kube-apiserver, kube-controller-manager, kubectl, etcd) from the wrapper Go
# module in this directory, once, into a cache outside the work tree:
#
#   ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/controlplane/<key>/bin/
#
# <key> is the sha256 of go.sum + go.mod (+ RECIPE below, bumped by hand when the
# build flags change). When every binary is already there nothing is built.
#
# Progress goes to stderr; the last line on stdout is the bin directory, so
# callers can do:  BIN=$(e2e/controlplane/build.sh | tail -n1)
#
# Options:  --print-bin-dir  print the bin directory and exit 0 (no build, no checks)
#           --check          print the bin directory and exit 0 when every binary is cached; exit 3 (no build) when not
#           --force          rebuild even when the binaries are cached
set -euo pipefail

# Everything runs inside main(), which bash parses whole before running, and the call and the exit share one line:
# editing this file during a build (which takes minutes) cannot break the running build.
main() {

RECIPE=2 # bump when the steps below change, so old caches are not reused (the flags are in the key already)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}

TAG=controlplane-build
# shellcheck source=../harness/source-build.sh
source "$HERE/../harness/source-build.sh"

KEY=$(cat "$HERE/go.sum" "$HERE/go.mod" <(printf 'recipe=%s\n%s\n' "$RECIPE" "$GO_BUILD_FLAGS_KEY") | sha256sum | cut -d' ' -f1)
parse_build_args 17 "$@"

# name:package, in build order. kubectl is optional (the harness falls back to the system one).
TARGETS=(
  "kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager"
  "etcd:go.etcd.io/etcd/server/v3"
  "kubectl:k8s.io/kubernetes/cmd/kubectl"
)
REQUIRED="kube-apiserver kube-controller-manager etcd"

# kubectl counts as present when an earlier build recorded that it cannot be built.
all_built() {
  local t n
  for t in "${TARGETS[@]}"; do
    n=${t%%:*}
    [[ -x "$BIN/$n" || ( " $REQUIRED " != *" $n "* && -e "$BIN/.$n.failed" ) ]] || return 1
  done
}

use_cache controlplane all_built "all binaries"

K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$HERE/go.mod")
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }' "$HERE/go.mod")
[[ $K8S_VERSION =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "cannot read the k8s.io/kubernetes version from $HERE/go.mod"
K8S_MAJOR=${BASH_REMATCH[1]}
K8S_MINOR=${BASH_REMATCH[2]}

find_go "Go >= 1.24"
# GOTOOLCHAIN=local unless the caller chose a toolchain (CI may pick a newer one for an old system Go).
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
GO_VERSION=$("$GO" env GOVERSION) || die "'$GO env GOVERSION' failed"
[[ $GO_VERSION =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 24)) || die "Go >= 1.24 is needed (tool directives); found $GO_VERSION"

export CGO_ENABLED=0 GOFLAGS=-mod=readonly
mkdir -p "$CACHE_ROOT/controlplane"

# One build at a time per key (the test runner and `cluster:up` may both ask).
lock_build all_built

log "Kubernetes $K8S_VERSION, etcd $ETCD_VERSION, $GO_VERSION ($GO)"
log "cache: $OUT"
log "GOPROXY=$("$GO" env GOPROXY) GOMODCACHE=$("$GO" env GOMODCACHE) GOCACHE=$("$GO" env GOCACHE)"

cd "$HERE"
DL_LOG=$(mktemp)
trap 'rm -f "$DL_LOG"' EXIT
# Only what the targets need: the module also pins helm (scripts/helm/build.sh), whose modules its own step fetches.
PKGS=()
for t in "${TARGETS[@]}"; do PKGS+=("${t#*:}"); done
log "downloading modules (go list -deps of the targets; instant when already cached)"
if ! with_heartbeat "downloading modules" "$GO" list -deps "${PKGS[@]}" >"$DL_LOG" 2>&1; then
  cat "$DL_LOG" >&2
  die "could not download the Go modules listed in $HERE/go.mod from the module proxy ($("$GO" env GOPROXY)). Is it reachable? (If only the checksum database $("$GO" env GOSUMDB) fails, go.sum is committed and GOSUMDB=off is safe for this step.)"
fi
log "modules ready ($(elapsed) s)"

# /version: the pinned release, its publication time as buildDate, no commit (the module zip has no git data).
BUILD_DATE=$("$GO" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes 2>/dev/null || echo 1970-01-01T00:00:00Z)
LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$K8S_MAJOR -X $pkg.gitMinor=$K8S_MINOR"
  LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit= -X $pkg.buildDate=$BUILD_DATE"
done

TMP=$OUT/tmp.$$
rm -rf "$TMP"
mkdir -p "$TMP" "$BIN"
FAILED_OPTIONAL=""
for t in "${TARGETS[@]}"; do
  name=${t%%:*}
  pkg=${t#*:}
  if [[ $FORCE == 0 && -x $BIN/$name ]]; then
    log "$name: cached"
    continue
  fi
  t0=$(date +%s)
  log "$name: building $pkg"
  if with_heartbeat "building $name" "$GO" build "${GO_BUILD_SERVER[@]}" -ldflags "$LDFLAGS" -o "$TMP/$name" "$pkg"; then
    mv -f "$TMP/$name" "$BIN/$name"
    rm -f "$BIN/.$name.failed"
    log "$name: built in $(($(date +%s) - t0)) s (total $(elapsed) s)"
  elif [[ " $REQUIRED " == *" $name "* ]]; then
    rm -rf "$TMP"
    die "building $name ($pkg) failed; see the compiler output above"
  else
    log "WARNING: building $name failed; the harness will fall back to the system $name"
    touch "$BIN/.$name.failed"
    FAILED_OPTIONAL+=" $name"
  fi
done
rm -rf "$TMP"

got=$("$BIN/kube-apiserver" --version 2>&1 || true)
[[ $got == "Kubernetes $K8S_VERSION" ]] || die "kube-apiserver --version printed '$got', expected 'Kubernetes $K8S_VERSION'"
log "kube-apiserver --version: $got"
log "etcd --version: $("$BIN/etcd" --version 2>&1 | head -n1)"
[[ -z $FAILED_OPTIONAL ]] || log "not built:$FAILED_OPTIONAL"
log "done in $(elapsed) s"
echo "$BIN"
}

# One line: bash has read it whole before main runs, so the exit is certain even if this file changes meanwhile.
main "$@"; exit $?
