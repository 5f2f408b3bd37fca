#!/usr/bin/env bash
# Builds KubeVirt's virt-controller, unmodified, from the KubeVirt v1.9.0 source tarball (with its vendor/ folder; no
# module download), plus our small print-crds program (e2e/kubevirt/print-crds/main.go, compiled inside the unpacked
# tree because it calls KubeVirt's own CRD constructors), and writes the CRDs virt-operator installs to a YAML file:
#
#   ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/kubevirt/<key>/bin/{virt-controller,print-crds,kubevirt-crds.yaml}
#
# <key> is the sha256 of the tarball's sha256 + print-crds/main.go + RECIPE (bumped by hand when the flags change).
# The tarball is unpacked into the cache (never into the project) and removed once the build succeeded.
#
# The tarball: $PERSISTENT_IPS_KUBEVIRT_SOURCE (a file, or a folder holding kubevirt-v1.9.0.tar.gz); else
# ../shared/kubevirt/ beside the repository (from /work/main: /work/shared/kubevirt/), looked up from the worktree
# and from the main checkout of a git worktree.
#
# Progress goes to stderr; the last line on stdout is the bin directory.
#
# Options:  --print-bin-dir  print the bin directory and exit 0 (no build, no checks)
#           --check          print the bin directory and exit 0 when everything is cached; exit 3 (no build) when not
#           --force          rebuild even when cached
set -euo pipefail

main() {

RECIPE=1 # bump when the steps below change, so old caches are not reused (the flags are in the key already)
KUBEVIRT_VERSION=v1.9.0
KUBEVIRT_COMMIT=79d34c1762169e5b0370ec491cef5ca12e6b504c
TARBALL_NAME=kubevirt-$KUBEVIRT_VERSION.tar.gz
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE_ROOT=${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}

TAG=kubevirt-build
# shellcheck source=../harness/source-build.sh
source "$HERE/../harness/source-build.sh"

parse_build_args 20 "$@"

find_shared_tarball kubevirt "$TARBALL_NAME" "${PERSISTENT_IPS_KUBEVIRT_SOURCE:-}" PERSISTENT_IPS_KUBEVIRT_SOURCE

TARBALL_SHA=$(sha256sum "$TARBALL" | cut -d' ' -f1)
KEY=$( { printf 'tarball=%s\nrecipe=%s\n%s\n' "$TARBALL_SHA" "$RECIPE" "$GO_BUILD_FLAGS_KEY"; cat "$HERE/print-crds/main.go"; } | sha256sum | cut -d' ' -f1)
all_built() { [[ -x $BIN/virt-controller && -x $BIN/print-crds && -s $BIN/kubevirt-crds.yaml ]]; }
use_cache kubevirt all_built "virt-controller and the CRDs"

find_go "Go >= 1.26 (KubeVirt $KUBEVIRT_VERSION's go.mod)"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
GO_VERSION=$("$GO" env GOVERSION) || die "'$GO env GOVERSION' failed"
[[ $GO_VERSION =~ ^go1\.([0-9]+) ]] && ((BASH_REMATCH[1] >= 26)) || die "KubeVirt $KUBEVIRT_VERSION needs Go >= 1.26 (its go.mod); found $GO_VERSION"

# vendor/ holds every dependency: no module proxy is involved (it refuses kubevirt.io/kubevirt anyway).
export CGO_ENABLED=0 GOFLAGS=-mod=vendor GOPROXY=off
mkdir -p "$CACHE_ROOT/kubevirt"

lock_build all_built

log "KubeVirt $KUBEVIRT_VERSION from $TARBALL (sha256 $TARBALL_SHA), $GO_VERSION ($GO)"
unpack_tarball
[[ -f $SRC/go.mod && -d $SRC/vendor ]] || die "$TARBALL does not hold a KubeVirt tree with vendor/ (no go.mod or vendor/ at its top folder)"
log "unpacked ($(elapsed) s)"

VERSION_PKG=kubevirt.io/client-go/version
LDFLAGS="-s -w -X $VERSION_PKG.gitVersion=$KUBEVIRT_VERSION -X $VERSION_PKG.gitCommit=$KUBEVIRT_COMMIT -X $VERSION_PKG.gitTreeState=clean"

mkdir -p "$SRC/tools/persistent-ips-print-crds"
cp "$HERE/print-crds/main.go" "$SRC/tools/persistent-ips-print-crds/main.go"

cd "$SRC"
t0=$(date +%s)
log "print-crds: building"
with_heartbeat "building print-crds" "$GO" build "${GO_BUILD_SERVER[@]}" -ldflags "$LDFLAGS" -o "$BIN/print-crds.tmp" ./tools/persistent-ips-print-crds \
  || die "building print-crds failed; see the compiler output above"
mv -f "$BIN/print-crds.tmp" "$BIN/print-crds"
log "print-crds: built in $(($(date +%s) - t0)) s"
"$BIN/print-crds" >"$BIN/kubevirt-crds.yaml.tmp" || die "print-crds failed"
mv -f "$BIN/kubevirt-crds.yaml.tmp" "$BIN/kubevirt-crds.yaml"
log "CRDs: $(grep -c '^kind: CustomResourceDefinition' "$BIN/kubevirt-crds.yaml") in $BIN/kubevirt-crds.yaml"

t0=$(date +%s)
log "virt-controller: building ./cmd/virt-controller (~2 min and ~1.3 GB on 2 cores with a warm Go build cache)"
with_heartbeat "building virt-controller" "$GO" build "${GO_BUILD_SERVER[@]}" -ldflags "$LDFLAGS" -o "$BIN/virt-controller.tmp" ./cmd/virt-controller \
  || die "building virt-controller failed; see the compiler output above"
mv -f "$BIN/virt-controller.tmp" "$BIN/virt-controller"
log "virt-controller: built in $(($(date +%s) - t0)) s"

cd /
rm -rf "$SRC"
log "done in $(elapsed) s"
echo "$BIN"
}

main "$@"; exit $?
