#!/usr/bin/env bash
# Rehearses CI on a cold machine: a fresh clone of this repository's HEAD (committed work only) and empty caches
# (a temporary HOME holds the npm cache, GOPATH/GOMODCACHE, GOCACHE and PERSISTENT_IPS_CACHE), then .ci/run, as
# CI runs it. The log and the phase times land in the work directory.
#
#   scripts/ci-cold.sh            cold: new work directory, empty caches
#   scripts/ci-cold.sh DIR        run again in DIR (a previous run's): a new clone, the caches DIR/home kept (warm)
#   scripts/ci-cold.sh --bare [DIR]   the README's own words instead of .ci/run: `npm ci && npm test` on a PATH
#                                 without buildah, promtool, helm or kubectl (links to every other command: the
#                                 tests must build them or do without), then `npm run release` and the image smoke
#                                 test with the machine's PATH, as .ci/run runs them
#   scripts/ci-cold.sh --rm [--bare]  as above, then delete the work directory (about 11 GB); the log is
#                                 moved out first, next to it
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
bare=0 remove=0
while [[ ${1:-} == --bare || ${1:-} == --rm ]]; do
  if [[ $1 == --bare ]]; then bare=1; else remove=1; fi
  shift
done
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
if [[ $bare == 1 ]]; then
  # A PATH of links to every command of this one but the hidden tools: `command -v` and exec find none of them.
  bin=$WORK/bare-bin
  rm -rf "$bin" && mkdir -p "$bin"
  IFS=: read -ra dirs <<<"$PATH"
  for d in "${dirs[@]}"; do
    for f in "$d"/*; do
      n=${f##*/}
      case $n in buildah | promtool | helm | kubectl) continue ;; esac
      [[ -x $f && ! -e $bin/$n ]] && ln -s "$f" "$bin/$n"
    done
  done
  PATH=$bin bash -c '
    echo "ci-cold: bare: $(for t in buildah promtool helm kubectl; do command -v $t >/dev/null && echo "$t ON PATH" || echo "no $t"; done | paste -sd, -)"
    t=$(date +%s)
    npm ci --no-audit --no-fund && echo "ci: npm ci took $(( $(date +%s) - t )) s" && npm test' 2>&1 | tee "$LOG"
  rc=${PIPESTATUS[0]}
  if [[ $rc == 0 ]]; then
    scripts/ci-release.sh 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
  fi
else
  ./.ci/run 2>&1 | tee "$LOG"
  rc=${PIPESTATUS[0]}
fi
set -e
kept="caches kept in $HOME (rerun: $0 $WORK)"
[[ $remove == 1 ]] && kept="work directory to be removed"
echo "ci-cold: $mode run ended with $rc after $(( $(date +%s) - start )) s; $kept" | tee -a "$LOG"
grep -E '^(ci: |=== test: |binaries|typecheck|lint|unit|build|e2e|runtime|  e2e/|  \[[0-9]+ s\] \[controlplane-build\] .*(built in|done in|modules ready))' "$LOG" || true
if [[ $remove == 1 ]]; then
  # The Go module cache is read-only by design; make it writable so that rm can remove it.
  mv "$LOG" "$WORK.log"
  cd / && chmod -R u+w "$WORK" && rm -rf "$WORK" && echo "ci-cold: removed $WORK; log $WORK.log"
fi
exit "$rc"
