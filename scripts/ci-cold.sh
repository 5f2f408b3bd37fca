#!/usr/bin/env bash
# Rehearses CI on a cold machine: a fresh clone of this repository's HEAD (committed work only) and empty caches
# (a temporary HOME holds the npm cache, GOPATH/GOMODCACHE, GOCACHE and PERSISTENT_IPS_CACHE), then .ci/run, as
# CI runs it. The log and the phase times land in the work directory.
#
#   scripts/ci-cold.sh            cold: new work directory, empty caches
#   scripts/ci-cold.sh DIR        run again in DIR (a previous run's): a new clone, the caches DIR/home kept (warm)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-$(mktemp -d /tmp/pips-ci-cold.XXXXXX)}
mode=warm
[[ -d $WORK/home ]] || mode=cold
mkdir -p "$WORK/home"
WORK=$(cd "$WORK" && pwd)

# Nothing of this machine's caches or settings may leak in.
for v in $(env | sed -n 's/^\(npm_[A-Za-z_]*\|GO[A-Z0-9_]*\|PERSISTENT_IPS_[A-Z_]*\|KUBECONFIG\)=.*/\1/p'); do unset "$v"; done
export HOME=$WORK/home
export npm_config_cache=$HOME/.npm GOPATH=$HOME/go GOMODCACHE=$HOME/go/pkg/mod GOCACHE=$HOME/.cache/go-build
export PERSISTENT_IPS_CACHE=$HOME/.cache/persistent-ips

rm -rf "$WORK/clone"
git clone -q "$SRC" "$WORK/clone"
cd "$WORK/clone"
LOG=$WORK/ci-$mode-$(date +%Y%m%dT%H%M%S).log
echo "ci-cold: $mode run of $(git rev-parse --short HEAD) in $WORK/clone (HOME=$HOME); log $LOG"
start=$(date +%s)
set +e
./.ci/run 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
echo "ci-cold: $mode run ended with $rc after $(( $(date +%s) - start )) s; caches kept in $HOME (rerun: $0 $WORK)" | tee -a "$LOG"
grep -E '^(ci: |=== test: |binaries|typecheck|lint|unit|build|e2e|runtime|  e2e/|  \[[0-9]+ s\] \[controlplane-build\] .*(built in|done in|modules ready))' "$LOG" || true
exit "$rc"
