#!/usr/bin/env bash
# Builds the unmodified upstream helm CLI from the wrapper Go module e2e/helm (version pinned in its go.mod), once,
# into a cache outside the work tree:
#   ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/helm/<key>/bin/helm
# <key> is the sha256 of e2e/helm/go.mod + go.sum. When the binary is there nothing is built. Progress goes to
# stderr; the last line on stdout is the binary's path:  HELM=$(scripts/helm/build.sh | tail -n1)
# Options:  --check  print the binary's path and exit 0 when it is built; exit 3 (no build) when not
set -euo pipefail

main() {
  local here mod cache key out bin
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  mod="$(cd "$here/../../e2e/helm" && pwd)"
  cache="${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}"
  key="$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1)"
  out="$cache/helm/$key"
  bin="$out/bin/helm"
  log() { printf '[helm-build] %s\n' "$*" >&2; }
  case "${1:-}" in
    --check) [ -x "$bin" ] && echo "$bin" && exit 0; log "not built yet: $bin"; exit 3 ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    "") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  if [ -x "$bin" ]; then log "cached: $bin"; echo "$bin"; exit 0; fi

  local go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  [ -x "$go" ] || { log "ERROR: the Go toolchain was not found"; exit 1; }
  export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0 GOFLAGS=-mod=readonly
  mkdir -p "$out/bin"
  exec 9>"$out.lock"
  if ! flock -n 9; then log "another build is running; waiting for it"; flock 9; fi
  if [ -x "$bin" ]; then log "cached (built by the other process): $bin"; echo "$bin"; exit 0; fi

  local version t0
  version="$(awk '$1 == "helm.sh/helm/v3" { print $2; exit }' "$mod/go.mod")"
  t0=$(date +%s)
  log "building helm $version with $("$go" env GOVERSION) into $out"
  cd "$mod"
  "$go" mod download >&2
  # helm prints its version from these variables (a module build has no git data).
  "$go" build -trimpath -buildvcs=false \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
    -o "$out/bin/helm.tmp" helm.sh/helm/v3/cmd/helm
  mv -f "$out/bin/helm.tmp" "$bin"
  log "$("$bin" version --short) built in $(($(date +%s) - t0)) s"
  echo "$bin"
}

main "$@"
