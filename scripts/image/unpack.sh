#!/usr/bin/env bash
# scripts/image/unpack.sh ARCHIVE DIR [ARCH]
# Unpacks one platform's image of the OCI archive ARCHIVE without a container runtime: DIR/rootfs holds the layers
# applied in order, DIR/config.json the image configuration (Entrypoint, Cmd, User, Env, WorkingDir, Labels).
# ARCHIVE may hold one image or an image index (one image per platform, as scripts/image/build.sh writes): ARCH
# (default: this machine's, as Debian names it: amd64, arm64) picks linux/ARCH from it. Whiteouts are applied (an
# image built FROM scratch has none, but a rebuilt one might).
#   scripts/image/unpack.sh --platforms ARCHIVE    prints the archive's platforms, os/architecture, one a line
set -euo pipefail
if [ "${1:-}" = --platforms ]; then
  archive="${2:?usage: unpack.sh --platforms ARCHIVE}"
  dir="$(mktemp -d)"; trap 'rm -rf "$dir"' EXIT
  tar -xf "$archive" -C "$dir"
  mode=platforms
else
  archive="${1:?usage: unpack.sh ARCHIVE DIR [ARCH]}"
  out="${2:?usage: unpack.sh ARCHIVE DIR [ARCH]}"
  arch="${3:-$(dpkg --print-architecture 2>/dev/null || uname -m)}"
  mkdir -p "$out/oci" "$out/rootfs"
  dir="$out/oci"
  tar -xf "$archive" -C "$dir"
  mode=unpack
fi
# The image manifests reachable from index.json (through nested indexes), as "os/architecture digest" lines.
manifests() {
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
def blob(digest): return json.load(open(f'{d}/blobs/{digest.replace(":", "/")}'))
def walk(index, platform=None):
    for m in index.get("manifests", []):
        p = m.get("platform") or platform
        if m["mediaType"].endswith("image.index.v1+json") or m["mediaType"].endswith("manifest.list.v2+json"):
            walk(blob(m["digest"]), p)
        else:
            if p is None:
                c = blob(blob(m["digest"])["config"]["digest"])
                p = {"os": c.get("os"), "architecture": c.get("architecture")}
            print(f'{p["os"]}/{p["architecture"]} {m["digest"]}')
walk(json.load(open(f'{d}/index.json')))
PY
}
if [ $mode = platforms ]; then manifests | cut -d' ' -f1; exit 0; fi
digest="$(manifests | awk -v p="linux/$arch" '$1 == p { print $2; exit }')"
[ -n "$digest" ] || { echo "unpack.sh: $archive holds no linux/$arch image (it has: $(manifests | cut -d' ' -f1 | tr '\n' ' '))" >&2; exit 1; }
blob() { printf '%s/blobs/%s' "$dir" "$(printf '%s' "$1" | tr ':' '/')"; }
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$1" "$2"; }
manifest="$(blob "$digest")"
cp "$(blob "$(json "$manifest" 'd["config"]["digest"]')")" "$out/config.json"
for layer in $(json "$manifest" '" ".join(l["digest"] for l in d["layers"])'); do
  f="$(blob "$layer")"
  # Whiteouts: .wh.NAME deletes NAME, .wh..wh..opq empties the directory.
  tar -tzf "$f" | { grep -E '(^|/)\.wh\.' || true; } | while read -r wh; do
    d="$(dirname "$wh")"; b="$(basename "$wh")"
    if [ "$b" = .wh..wh..opq ]; then rm -rf "${out:?}/rootfs/$d"/* 2>/dev/null || true
    else rm -rf "${out:?}/rootfs/$d/${b#.wh.}"; fi
  done
  tar -xzf "$f" -C "$out/rootfs" --numeric-owner --same-permissions --exclude='*.wh.*' --exclude='.wh.*'
done
rm -rf "$out/oci"
