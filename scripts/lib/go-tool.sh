# shellcheck shell=bash
# Builds an unmodified upstream Go command from a wrapper Go module whose go.mod pins its version, once, into a cache
# outside the work tree:
#   ${PERSISTENT_IPS_CACHE:-$HOME/.cache/persistent-ips}/<TOOL>/<key>/bin/<TOOL>
# <key> is the sha256 of the module's go.mod + go.sum + GO_TOOL_RECIPE (+ the tool's tool_configure and
# TOOL_BUILD_FLAGS, below). When the binary is there nothing is built.
# Progress goes to stderr; the last line on stdout is the binary's path. With `--check`: print the path and exit 0 when it is built,
# exit 3 (no build) when not.
#
# Sourced by the build scripts of helm (scripts/helm/build.sh), promtool (e2e/promtool/build.sh) and syft
# (scripts/syft/build.sh), which set, before calling go_tool_main "$@":
#   TOOL        the command's name (cache folder, binary, log prefix)
#   MOD         the wrapper module's directory
#   MODULE      the upstream module whose pinned version is the tool's
#   PACKAGE     the command's package
#   TOOLCHAIN   GOTOOLCHAIN unless the caller's environment sets one: `local`, or `auto` where go.mod asks for a Go
#               newer than the machine's and the go command may fetch it
# and define:
#   tool_ldflags VERSION   the -X flags that give the binary its version (a module build has no git data)
#   tool_describe BIN      one line saying what was built (the binary's own version output)
# and may define:
#   tool_configure         run in a vendored copy of the module (vendor/ from `go mod vendor`, under the cache) before
#                          the build, for a build-time choice the upstream project makes by regenerating a source file
#                          (promtool's service-discovery plugins); the build then uses that copy (-mod=vendor)
#
# They are built with GO_BUILD_TOOL (scripts/lib/go-build-flags.sh says why), unless the script sets the array
#   TOOL_BUILD_FLAGS     the go build flags instead: GO_BUILD_SERVER for a tool built from the control plane's module
#                        (helm), so that it reuses the packages the control plane compiled instead of compiling them again
# shellcheck source=./go-build-flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/go-build-flags.sh"
GO_TOOL_RECIPE=2 # bump when the steps below change, so old caches are not reused (the flags are in the key already)

go_tool_main() {
  local cache key out bin
  cache="${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}"
  local -a flags=("${GO_BUILD_TOOL[@]}")
  local own_flags=""
  if declare -p TOOL_BUILD_FLAGS >/dev/null 2>&1; then
    flags=("${TOOL_BUILD_FLAGS[@]}")
    own_flags="flags=${flags[*]}"$'\n'
  fi
  key="$({
    cat "$MOD/go.mod" "$MOD/go.sum"
    echo "recipe=$GO_TOOL_RECIPE $GO_BUILD_FLAGS_KEY"
    declare -f tool_configure || true
    printf '%s' "$own_flags"
  } | sha256sum | cut -d' ' -f1)"
  out="$cache/$TOOL/$key"
  bin="$out/bin/$TOOL"
  log() { printf '[%s-build] %s\n' "$TOOL" "$*" >&2; }
  case "${1:-}" in
    --check) [ -x "$bin" ] && echo "$bin" && exit 0; log "not built yet: $bin"; exit 3 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    "") ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  if [ -x "$bin" ]; then log "cached: $bin"; echo "$bin"; exit 0; fi

  local go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
  [ -x "$go" ] || { log "ERROR: the Go toolchain was not found (install Go >= 1.24 or set GO=/path/to/go)"; exit 1; }
  export GOTOOLCHAIN="${GOTOOLCHAIN:-$TOOLCHAIN}" CGO_ENABLED=0 GOFLAGS=-mod=readonly
  mkdir -p "$out/bin"
  exec 9>"$out.lock"
  if ! flock -n 9; then log "another build is running; waiting for it"; flock 9; fi
  if [ -x "$bin" ]; then log "cached (built by the other process): $bin"; echo "$bin"; exit 0; fi

  local version t0 src="$MOD" modflag=-mod=readonly
  version="$(awk -v m="$MODULE" '{ for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$MOD/go.mod")"
  [ -n "$version" ] || { log "ERROR: $MOD/go.mod pins no version of $MODULE"; exit 1; }
  t0=$(date +%s)
  cd "$MOD"
  log "downloading the modules of $TOOL $version (go mod download; instant when already cached)"
  "$go" mod download >&2
  if declare -F tool_configure >/dev/null; then
    src="$out/src"
    rm -rf "$src" && mkdir -p "$src" && cp "$MOD/go.mod" "$MOD/go.sum" "$src/"
    (cd "$src" && "$go" mod vendor && tool_configure) >&2
    modflag=-mod=vendor
  fi
  log "modules ready ($(($(date +%s) - t0)) s); building $PACKAGE with $("$go" env GOVERSION) into $out"
  cd "$src"
  "$go" build "$modflag" "${flags[@]}" -ldflags "-s -w $(tool_ldflags "$version")" -o "$bin.tmp" "$PACKAGE"
  mv -f "$bin.tmp" "$bin"
  [ "$src" = "$MOD" ] || rm -rf "$src"
  log "$(tool_describe "$bin") built in $(($(date +%s) - t0)) s"
  echo "$bin"
}
