#!/usr/bin/env bash
# Builds OVN-Kubernetes' `ovnkube`, unmodified, from the ovn-kubernetes v1.3.0 source tarball (a `git archive` of
# the tag with go-controller/vendor/: no module download), for the end-to-end suites that run its cluster manager as
# the IPAM of OVN-K networks (e2e/ovn-kubernetes/cluster-manager.ts):
#
#   ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/ovn-kubernetes/<key>/bin/ovnkube
#
# <key> is the sha256 of the tarball's sha256 + RECIPE (bumped by hand when the flags change). The tarball is
# unpacked into the cache (never into the project) and removed once the build succeeded.
#
# The tarball: $PERSISTENT_IPS_OVNK_SOURCE (a file, or a folder holding ovn-kubernetes-v1.3.0.tar.gz); else
# ../shared/ovn-kubernetes/ beside the repository (from /work/main: /work/shared/ovn-kubernetes/), looked up from the
# worktree and from the main checkout of a git worktree.
#
# Go: the tarball's go-controller/go.mod asks for a minimum Go. With GOTOOLCHAIN unset, a local Go that is new enough
# builds (GOTOOLCHAIN=local); an older one lets the go command fetch the toolchain go.mod names from the module proxy
# (as .ci/run does for Kubernetes) instead of failing. A GOTOOLCHAIN set by the caller is kept when new enough.
#
# Progress goes to stderr; the last line on stdout is the bin directory.
#
# Options:  --print-bin-dir  print the bin directory and exit 0 (no build, no checks)
#           --check          print the bin directory and exit 0 when built; exit 3 (no build) when not
#           --force          rebuild even when cached
set -euo pipefail

main() {

RECIPE=2 # bump when the steps below change, so old caches are not reused (the flags are in the key already)
OVNK_VERSION=v1.3.0
TARBALL_NAME=ovn-kubernetes-$OVNK_VERSION.tar.gz
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE_ROOT=${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}

TAG=ovnkube-build
# shellcheck source=../harness/source-build.sh
source "$HERE/../harness/source-build.sh"

parse_build_args 25 "$@"

find_shared_tarball ovn-kubernetes "$TARBALL_NAME" "${PERSISTENT_IPS_OVNK_SOURCE:-}" PERSISTENT_IPS_OVNK_SOURCE

TARBALL_SHA=$(sha256sum "$TARBALL" | cut -d' ' -f1)
KEY=$(printf 'tarball=%s\nrecipe=%s\n%s\n' "$TARBALL_SHA" "$RECIPE" "$GO_BUILD_FLAGS_KEY" | sha256sum | cut -d' ' -f1)
built() { [[ -x $BIN/ovnkube ]]; }
use_cache ovn-kubernetes built ovnkube

find_go "Go"
# Checked before the toolchain choice: `go env` itself would follow a GOTOOLCHAIN from the environment.
LOCAL_GO=$(GOTOOLCHAIN=local "$GO" env GOVERSION) || die "'$GO env GOVERSION' failed"

mkdir -p "$CACHE_ROOT/ovn-kubernetes"
lock_build built

log "OVN-Kubernetes $OVNK_VERSION from $TARBALL (sha256 $TARBALL_SHA), local $LOCAL_GO ($GO)"
unpack_tarball
MOD=$SRC/go-controller
[[ -f $MOD/go.mod && -d $MOD/vendor ]] || die "$TARBALL does not hold go-controller/ with go.mod and vendor/"
log "unpacked ($(elapsed) s)"

# The toolchain: local when new enough for go.mod's `go` line, else the one go.mod names (its `toolchain` line, or
# the `go` line), fetched by the go command.
NEED=$(sed -n -E 's/^go ([0-9.]+)$/\1/p' "$MOD/go.mod" | head -1)
WANT_TOOLCHAIN=$(sed -n -E 's/^toolchain (go[0-9.]+)$/\1/p' "$MOD/go.mod" | head -1)
[[ -n $NEED ]] || die "no 'go' line in $MOD/go.mod"
new_enough() { [[ $(printf '%s\n%s\n' "$NEED" "${1#go}" | sort -V | head -1) == "$NEED" ]]; }
# A toolchain the caller pinned (.ci/run pins one for Kubernetes when the system Go is old) is kept when it is new
# enough for this module, or is a policy (auto, path, +auto) the go command resolves itself.
PINNED=${GOTOOLCHAIN:-}
[[ $PINNED == local ]] && PINNED=$LOCAL_GO
if [[ $PINNED =~ ^go[0-9.]+$ ]] && new_enough "$PINNED" && [[ $PINNED != "$LOCAL_GO" ]]; then
  log "GOTOOLCHAIN=$GOTOOLCHAIN from the environment, new enough for go.mod's go $NEED"
elif [[ -n $PINNED && ! $PINNED =~ ^go[0-9.]+$ ]]; then
  log "GOTOOLCHAIN=$GOTOOLCHAIN from the environment (go.mod wants go >= $NEED)"
elif new_enough "$LOCAL_GO"; then
  export GOTOOLCHAIN=local
  log "local $LOCAL_GO satisfies go.mod's go $NEED: GOTOOLCHAIN=local"
else
  log "local $LOCAL_GO${GOTOOLCHAIN:+ (and GOTOOLCHAIN=$GOTOOLCHAIN)} is older than go.mod's go $NEED: GOTOOLCHAIN=${WANT_TOOLCHAIN:-go$NEED} (the go command fetches it from the module proxy once)"
  export GOTOOLCHAIN=${WANT_TOOLCHAIN:-go$NEED}
fi
# vendor/ holds every dependency of the module: nothing else is downloaded (the module proxy refuses this module).
# GOPROXY stays as configured only when a toolchain must be fetched.
export CGO_ENABLED=0 GOFLAGS=-mod=vendor
[[ $GOTOOLCHAIN == local ]] && export GOPROXY=off

cd "$MOD"
t0=$(date +%s)
log "ovnkube: building ./cmd/ovnkube (a few minutes and ~2 GB on 2 cores with a cold Go build cache)"
# Built as a tool (scripts/lib/go-build-flags.sh): the cluster manager allocates a handful of addresses per test.
with_heartbeat "building ovnkube" "$GO" build "${GO_BUILD_TOOL[@]}" -ldflags='-s -w' -o "$BIN/ovnkube.tmp" ./cmd/ovnkube \
  || die "building ovnkube failed; see the compiler output above"
mv -f "$BIN/ovnkube.tmp" "$BIN/ovnkube"
log "ovnkube: built in $(($(date +%s) - t0)) s with $("$GO" env GOVERSION)"

cd /
rm -rf "$SRC"
log "done in $(elapsed) s"
echo "$BIN"
}

main "$@"; exit $?
