#!/usr/bin/env bash
# Smoke test of the container image without a container runtime (called by .ci/run after npm test):
#   scripts/image/smoke.sh [ARCHIVE [INSTALL_YAML]]
# Without ARCHIVE it builds the image first (scripts/image/build.sh). Every platform's image in the archive is checked
# (scripts/image/inspect.sh: contents, the ELF architecture of node and its libraries, node run natively or under
# qemu-user-static when the machine has it); then this machine's (amd64) is unpacked (scripts/image/unpack.sh) and
# e2e/install/image-smoke.ts runs its entrypoint under chroot against a local control plane. Needs root.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
work="$(mktemp -d "${TMPDIR:-/tmp}/persistent-ips-smoke.XXXXXX")"
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
archive="${1:-}"
if [ -z "$archive" ]; then
  archive="$work/image.oci.tar"
  scripts/image/build.sh --out "$archive"
fi
t1=$(date +%s)
scripts/image/inspect.sh "$archive" >"$work/inspect.txt" || { cat "$work/inspect.txt"; exit 1; }
grep -E '^[^ ]+: .* platforms |^=== |^ELF check|^node' "$work/inspect.txt"
scripts/image/unpack.sh "$archive" "$work/image"
t2=$(date +%s)
export PERSISTENT_IPS_IMAGE_DIR="$work/image"
[ -z "${2:-}" ] || export PERSISTENT_IPS_INSTALL_YAML="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
node_modules/.bin/node --test --test-reporter=spec --test-force-exit e2e/install/image-smoke.ts
t3=$(date +%s)
echo "image smoke: build $((t1 - t0)) s, check and unpack $((t2 - t1)) s, run $((t3 - t2)) s, total $((t3 - t0)) s"
