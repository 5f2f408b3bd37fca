#!/usr/bin/env bash
# Builds the unmodified upstream promtool (github.com/prometheus/prometheus/cmd/promtool) from the wrapper Go module in
# this directory (version pinned in its go.mod), once, into a cache outside the work tree, the way scripts/helm/build.sh
# builds helm:
#   ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/promtool/<key>/bin/promtool
# <key> is the sha256 of go.mod + go.sum. When the binary is there nothing is built. Progress goes to stderr; the last
# line on stdout is the binary's path. e2e/operability/prometheus.test.ts checks manifests/prometheus with it.
# Options:  --check  print the binary's path and exit 0 when it is built; exit 3 (no build) when not
set -euo pipefail

main() {
  local here cache key out bin
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  cache="${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}"
  key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -d' ' -f1)"
  out="$cache/promtool/$key"
  bin="$out/bin/promtool"
  log() { printf '[promtool-build] %s\n' "$*" >&2; }
  case "${1:-}" in
    --check) [ -x "$bin" ] && echo "$bin" && exit 0; log "not built yet: $bin"; exit 3 ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    "") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  if [ -x "$bin" ]; then log "cached: $bin"; echo "$bin"; exit 0; fi

  local go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  [ -x "$go" ] || { log "ERROR: the Go toolchain was not found (install Go >= 1.24 or set GO=/path/to/go)"; exit 1; }
  export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0 GOFLAGS=-mod=readonly
  mkdir -p "$out/bin"
  exec 9>"$out.lock"
  if ! flock -n 9; then log "another build is running; waiting for it"; flock 9; fi
  if [ -x "$bin" ]; then log "cached (built by the other process): $bin"; echo "$bin"; exit 0; fi

  # Prometheus 3.x is published as module version v0.3MM.P: v0.308.1 is Prometheus 3.8.1.
  local modversion version t0
  modversion="$(awk '$1 == "github.com/prometheus/prometheus" { print $2; exit }' "$here/go.mod")"
  [[ $modversion =~ ^v0\.([0-9])([0-9]{2})\.([0-9]+)$ ]] || { log "ERROR: cannot read the Prometheus version from $here/go.mod ($modversion)"; exit 1; }
  version="${BASH_REMATCH[1]}.$((10#${BASH_REMATCH[2]})).${BASH_REMATCH[3]}"
  t0=$(date +%s)
  log "building promtool $version ($modversion) with $("$go" env GOVERSION) into $out"
  cd "$here"
  log "downloading modules (go mod download; instant when already cached)"
  "$go" mod download >&2
  log "modules ready ($(($(date +%s) - t0)) s); compiling"
  # promtool prints its version from these variables (a module build has no git data).
  "$go" build -trimpath -buildvcs=false \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version -X github.com/prometheus/common/version.Branch=$modversion" \
    -o "$out/bin/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool
  mv -f "$out/bin/promtool.tmp" "$bin"
  log "$("$bin" --version 2>&1 | head -n1) built in $(($(date +%s) - t0)) s"
  echo "$bin"
}

main "$@"
