#!/usr/bin/env bash
# Smoke test of the container image without a container runtime (called by .ci/run after npm test):
#   scripts/image/smoke.sh [ARCHIVE [INSTALL_YAML]]
# Without ARCHIVE it builds the image first (scripts/image/build.sh). The archive is unpacked (scripts/image/unpack.sh)
# and e2e/install/image-smoke.ts runs its entrypoint under chroot against a local control plane. Needs root.
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
scripts/image/unpack.sh "$archive" "$work/image"
t2=$(date +%s)
export PERSISTENT_IPS_IMAGE_DIR="$work/image"
[ -z "${2:-}" ] || export PERSISTENT_IPS_INSTALL_YAML="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
node_modules/.bin/node --test --test-reporter=spec --test-force-exit e2e/install/image-smoke.ts
t3=$(date +%s)
echo "image smoke: build $((t1 - t0)) s, unpack $((t2 - t1)) s, run $((t3 - t2)) s, total $((t3 - t0)) s"
