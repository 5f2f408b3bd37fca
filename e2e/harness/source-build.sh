# Sourced by the build scripts of the components built from source (e2e/controlplane/build.sh, e2e/kubevirt/build.sh,
# e2e/ovn-kubernetes/build.sh): their common steps, one copy. A script sets TAG (its log prefix) and calls these.

# shellcheck source=../../scripts/lib/go-build-flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/go-build-flags.sh"

log() { printf '[%s] %s\n' "$TAG" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$TAG" "$*" >&2; exit 1; }

# The options every such script takes; sets FORCE, CHECK and PRINT. $1: how many header lines --help prints.
parse_build_args() {
  local help_lines=$1; shift
  FORCE=0 CHECK=0 PRINT=0
  for arg in "$@"; do
    case "$arg" in
      --print-bin-dir) PRINT=1 ;;
      --check) CHECK=1 ;;
      --force) FORCE=1 ;;
      -h | --help) sed -n "2,${help_lines}p" "$0"; exit 0 ;;
      *) die "unknown argument: $arg" ;;
    esac
  done
}

# Sets OUT and BIN, the cache folder $CACHE_ROOT/$1/$KEY and its bin/, then: --print-bin-dir prints BIN; a complete
# build ($2: the function that checks it; $3 what it says is there) prints BIN unless --force; --check exits 3 when
# there is none. Every such exit is 0 but the last.
use_cache() {
  OUT=$CACHE_ROOT/$1/$KEY
  BIN=$OUT/bin
  [[ $PRINT == 1 ]] && { echo "$BIN"; exit 0; }
  if [[ $FORCE == 0 ]] && "$2"; then
    log "cached: $3 present"
    echo "$BIN"
    exit 0
  fi
  if [[ $CHECK == 1 ]]; then
    log "not built yet: $BIN"
    exit 3
  fi
}

# Unpacks $TARBALL into a fresh $OUT/src (sets SRC), for a build that runs in the cache, never in the project.
unpack_tarball() {
  log "cache: $OUT"
  SRC=$OUT/src
  rm -rf "$SRC"
  mkdir -p "$SRC" "$BIN"
  log "unpacking the source into the cache"
  with_heartbeat "unpacking" tar -xzf "$TARBALL" -C "$SRC" --strip-components=1
}

# Sets TARBALL to the tarball $2 of the folder ../shared/$1: the override $3 (a file, or a folder holding it), else
# beside the repository $REPO, beside the main checkout when this is a linked git worktree, beside the repository a
# clone was made from (its origin, when a local path: CI, scripts/ci-cold.sh), or /work/shared/$1. $4 names the
# override's variable in the error.
find_shared_tarball() {
  local folder=$1 name=$2 override=$3 variable=$4 common origin c
  local candidates=()
  TARBALL=""
  if [[ -n $override ]]; then
    if [[ -d $override ]]; then candidates+=("$override/$name"); else candidates+=("$override"); fi
  else
    candidates+=("$REPO/../shared/$folder/$name")
    common=$(git -C "$REPO" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
    [[ -n $common ]] && candidates+=("$(dirname "$common")/../shared/$folder/$name")
    origin=$(git -C "$REPO" remote get-url origin 2>/dev/null || true)
    [[ $origin == /* ]] && candidates+=("$origin/../shared/$folder/$name")
    candidates+=("/work/shared/$folder/$name")
  fi
  for c in "${candidates[@]}"; do
    if [[ -f $c ]]; then TARBALL=$(cd "$(dirname "$c")" && pwd)/$(basename "$c"); return 0; fi
  done
  die "the source tarball $name was not found (looked at: ${candidates[*]}); set $variable to the file or to the folder holding it"
}

# Sets GO to the go command: $GO, else `go` on the PATH, else /usr/local/go/bin/go. $1: what to say is needed.
find_go() {
  GO=${GO:-}
  if [[ -z $GO ]]; then
    GO=$(command -v go || true)
    [[ -z $GO && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
  fi
  [[ -n $GO && -x $GO ]] || die "the Go toolchain was not found (looked for 'go' on PATH and /usr/local/go/bin/go); install $1 or set GO=/path/to/go"
}

# One build per cache key at a time; exits 0 with the bin directory when the other build made it. $1: the check
# that the build is complete (a function name).
lock_build() {
  local built=$1
  exec 9>"$OUT.lock"
  if ! flock -n 9; then
    log "another build of $KEY is running; waiting for it"
    flock 9
  fi
  if [[ $FORCE == 0 ]] && "$built"; then
    log "cached: built by the other process"
    echo "$BIN"
    exit 0
  fi
  START=$(date +%s)
}

elapsed() { echo $(($(date +%s) - START)); }

# Runs "$@" in the background, printing a heartbeat every 20 s while it runs. $1: what it is doing.
with_heartbeat() {
  local what=$1; shift
  local t0 pid n=0
  t0=$(date +%s)
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if ((n % 20 == 0)); then log "... still $what ($(($(date +%s) - t0)) s, total $(elapsed) s)"; fi
  done
  wait "$pid"
}
