#!/usr/bin/env bash
# Builds the manager of kubevirt/ipam-extensions (the Go reference implementation) from its source, for the benchmark's
# side-by-side mode only: `npm run bench -- --scales 1000,3000 --compare-ie "$(bench/ipam-extensions/build.sh)"`.
# Never run by CI or the tests. The source comes from a git repository of kubevirt/ipam-extensions (its module is not
# served by the Go module proxy; the tagged tree vendors its dependencies, so the build needs no network).
#
#   bench/ipam-extensions/build.sh [OUT]        OUT: default ~/.cache/persistent-ips/ipam-extensions/<tag>/manager
#   IE_REPO=<git dir or URL>  IE_TAG=v0.6.0     where the source comes from: a local (bare) clone or a URL
#                                                (default: https://github.com/kubevirt/ipam-extensions.git)
#
# Prints the binary's path on its last line; a binary already at OUT is reused.
set -euo pipefail
tag="${IE_TAG:-v0.6.0}"
out="${1:-$HOME/.cache/persistent-ips/ipam-extensions/$tag/manager}"
if [[ -x "$out" ]]; then
  echo "$out"
  exit 0
fi
repo="${IE_REPO:-https://github.com/kubevirt/ipam-extensions.git}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [[ -d "$repo" ]]; then
  git --git-dir="$repo" archive "$tag" | tar -x -C "$tmp"
else
  git clone --quiet --depth 1 --branch "$tag" "$repo" "$tmp/src" && mv "$tmp/src"/* "$tmp/src"/.[!.]* "$tmp"/ 2>/dev/null || true
fi
mkdir -p "$(dirname "$out")"
(cd "$tmp" && CGO_ENABLED=0 GOFLAGS=-mod=vendor go build -trimpath -o "$out.tmp" ./cmd) >&2
mv "$out.tmp" "$out"
echo "$out"
