#!/usr/bin/env bash
# scripts/image/unpack.sh ARCHIVE DIR
# Unpacks the (single-manifest) OCI archive ARCHIVE without a container runtime: DIR/rootfs holds the layers applied
# in order, DIR/config.json the image configuration (Entrypoint, Cmd, User, Env, WorkingDir, Labels). Whiteouts are
# applied (an image built FROM scratch has none, but a rebuilt one might).
set -euo pipefail
archive="${1:?usage: unpack.sh ARCHIVE DIR}"
dir="${2:?usage: unpack.sh ARCHIVE DIR}"
mkdir -p "$dir/oci" "$dir/rootfs"
tar -xf "$archive" -C "$dir/oci"
blob() { printf '%s/oci/blobs/%s' "$dir" "$(printf '%s' "$1" | tr ':' '/')"; }
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$1" "$2"; }
manifest="$(blob "$(json "$dir/oci/index.json" 'd["manifests"][0]["digest"]')")"
cp "$(blob "$(json "$manifest" 'd["config"]["digest"]')")" "$dir/config.json"
for layer in $(json "$manifest" '" ".join(l["digest"] for l in d["layers"])'); do
  f="$(blob "$layer")"
  # Whiteouts: .wh.NAME deletes NAME, .wh..wh..opq empties the directory.
  tar -tzf "$f" | { grep -E '(^|/)\.wh\.' || true; } | while read -r wh; do
    d="$(dirname "$wh")"; b="$(basename "$wh")"
    if [ "$b" = .wh..wh..opq ]; then rm -rf "${dir:?}/rootfs/$d"/* 2>/dev/null || true
    else rm -rf "${dir:?}/rootfs/$d/${b#.wh.}"; fi
  done
  tar -xzf "$f" -C "$dir/rootfs" --numeric-owner --same-permissions --exclude='*.wh.*' --exclude='.wh.*'
done
rm -rf "$dir/oci"
