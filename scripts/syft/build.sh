#!/usr/bin/env bash
# Builds the unmodified upstream syft CLI (github.com/anchore/syft, the container image's SBOM: scripts/image/sbom.sh)
# from the wrapper Go module beside this file (version pinned in its go.mod), once, into a cache outside the work tree:
#   ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/syft/<key>/bin/syft
# <key> is the sha256 of go.mod + go.sum. When the binary is there nothing is built. Only `npm run release` needs it.
# Progress goes to stderr; the last line on stdout is the binary's path:  SYFT=$(scripts/syft/build.sh | tail -n1)
# Options:  --check  print the binary's path and exit 0 when it is built; exit 3 (no build) when not
set -euo pipefail

main() {
  local mod cache key out bin
  mod="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  cache="${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}"
  key="$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -d' ' -f1)"
  out="$cache/syft/$key"
  bin="$out/bin/syft"
  log() { printf '[syft-build] %s\n' "$*" >&2; }
  case "${1:-}" in
    --check) [ -x "$bin" ] && echo "$bin" && exit 0; log "not built yet: $bin"; exit 3 ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    "") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  if [ -x "$bin" ]; then log "cached: $bin"; echo "$bin"; exit 0; fi

  local go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  [ -x "$go" ] || { log "ERROR: the Go toolchain was not found"; exit 1; }
  # go.mod names the Go release syft needs: an older local Go fetches that toolchain from the module proxy.
  export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" CGO_ENABLED=0 GOFLAGS=-mod=readonly
  mkdir -p "$out/bin"
  exec 9>"$out.lock"
  if ! flock -n 9; then log "another build is running; waiting for it"; flock 9; fi
  if [ -x "$bin" ]; then log "cached (built by the other process): $bin"; echo "$bin"; exit 0; fi

  local version t0
  version="$(awk 'NF >= 2 && $(NF - 1) == "github.com/anchore/syft" { print $NF; exit }' "$mod/go.mod")"
  t0=$(date +%s)
  cd "$mod"
  log "downloading the modules of syft $version (once; a few minutes on a new machine)"
  "$go" mod download >&2
  log "building syft $version with $("$go" env GOVERSION) into $out (a few minutes on two cores)"
  # syft prints its version from this variable (a module build has no git data).
  "$go" build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${version#v}" \
    -o "$out/bin/syft.tmp" github.com/anchore/syft/cmd/syft
  mv -f "$out/bin/syft.tmp" "$bin"
  log "$("$bin" version | awk '$1 == "Version:" { print "syft " $2 }') built in $(($(date +%s) - t0)) s"
  echo "$bin"
}

main "$@"
