#!/usr/bin/env bash
# npm run release [-- --out DIR] [-- --no-image]
#
# Builds the release of the version in package.json, offline, into one folder (default release/<version>/):
#   persistent-ips-<version>.tgz          the npm package (npm pack; checked to hold no test code)
#   persistent-ips-<version>.npm.cdx.json the npm package's SBOM, CycloneDX JSON: the packages bundled into dist/ (the
#                                         esbuild plugin @cyclonedx/cyclonedx-esbuild, scripts/bundle.ts; the same list
#                                         as dist/THIRD-PARTY-NOTICES.txt; the package carries it as dist/persistent-ips.cdx.json)
#   install.yaml                          manifests/default rendered with kubectl kustomize, image pinned to v<version>
#   ipamclaim-crd.yaml                    the optional IPAMClaim CRD (manifests/ipamclaim-crd), for clusters without it
#   persistent-ips-<version>.oci.tar      the container image ghcr.io/persistent-ips/persistent-ips:v<version>, an OCI
#                                         archive of one image index for linux/amd64 and linux/arm64, built by
#                                         scripts/image/build.sh (buildah, no daemon, no base image)
#   persistent-ips-<version>.image-<arch>.cdx.json   each platform's image SBOM, CycloneDX JSON, by syft (built once
#                                         from its Go module by scripts/syft/build.sh): the Debian packages, Node, and
#                                         the bundled npm packages
#   persistent-ips-chart-<version>.tgz    the Helm chart, when a helm binary is at hand (HELM=, or the cached build)
#   image-contents.txt, SHA256SUMS
# kubectl: the harness's version-matched build (e2e/controlplane/build.sh), else the one on PATH. syft: SYFT=, else the
# cached build of scripts/syft/build.sh (built on first use, minutes).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"
log() { printf '[release] %s\n' "$*" >&2; }
die() { printf '[release] ERROR: %s\n' "$*" >&2; exit 1; }

out="" image=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?}"; shift 2 ;;
    --no-image) image=0; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done

node_bin="$repo/node_modules/node/bin/node"
[ -x "$node_bin" ] || die "run npm ci first"
version="$("$node_bin" -p 'require("./package.json").version')"
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "package.json version '$version' is not a semantic version"
# One version everywhere (CHANGELOG.md): the chart and the kustomize tree name the same release as package.json.
chart_version="$(awk '$1 == "version:" { print $2 }' charts/persistent-ips/Chart.yaml)"
chart_app="$(awk '$1 == "appVersion:" { gsub(/"/, "", $2); print $2 }' charts/persistent-ips/Chart.yaml)"
tree_tag="$(awk '$1 == "newTag:" { print $2 }' manifests/default/kustomization.yaml)"
[ "$chart_version" = "$version" ] && [ "$chart_app" = "$version" ] && [ "$tree_tag" = "v$version" ] \
  || die "versions disagree: package.json $version, Chart.yaml version $chart_version appVersion $chart_app, manifests/default newTag $tree_tag"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || { revision="$revision-dirty"; log "the work tree has uncommitted changes: revision $revision"; }
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
out="${out:-$repo/release/$version}"
rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
image_ref="ghcr.io/persistent-ips/persistent-ips:v$version"
start=$(date +%s)
log "persistent-ips $version ($revision) -> $out"

# --- npm package ------------------------------------------------------------------------------------------------
rm -rf dist
npm run --silent build >&2
tarball="$(npm pack --silent --pack-destination "$out" 2>/dev/null | tail -n1)"
[ -f "$out/$tarball" ] || die "npm pack wrote no tarball"
tar -tzf "$out/$tarball" >"$out/.contents"
# Test code never ships: unit tests, test-only modules, the e2e tree.
if grep -E '\.test\.|/testing\.js|/fixtures\.js|/fake-[^/]*\.js|^package/e2e/|^package/src/' "$out/.contents"; then
  die "the npm package holds test code or sources (above)"
fi
# The bundle carries its dependencies' code, so it carries their licences too.
grep -qx 'package/dist/THIRD-PARTY-NOTICES.txt' "$out/.contents" || die "the npm package lacks dist/THIRD-PARTY-NOTICES.txt"
grep -qx 'package/dist/persistent-ips.cdx.json' "$out/.contents" || die "the npm package lacks dist/persistent-ips.cdx.json"
cp dist/persistent-ips.cdx.json "$out/persistent-ips-$version.npm.cdx.json"
log "npm package: $tarball ($(du -h "$out/$tarball" | cut -f1), $(wc -l <"$out/.contents") files)"
rm -f "$out/.contents"

# --- install.yaml -----------------------------------------------------------------------------------------------
kubectl="$(e2e/controlplane/build.sh --print-bin-dir 2>/dev/null)/kubectl"
if [ ! -x "$kubectl" ]; then
  kubectl="$(command -v kubectl || true)"
  [ -n "$kubectl" ] || die "no kubectl: build the harness's (e2e/controlplane/build.sh) or put one on PATH"
  log "the harness's kubectl is not built; using $kubectl"
fi
# kustomize takes relative resource paths only: the overlay lives in the (ignored) build/ folder of the repository.
overlay="$repo/build/release-overlay"
mkdir -p "$overlay"
trap 'rm -rf "$overlay"' EXIT
cat >"$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests/default
images:
  - name: ghcr.io/persistent-ips/persistent-ips
    newTag: v$version
labels:
  - pairs:
      app.kubernetes.io/version: "$version"
    includeSelectors: false
EOF
{
  printf '# persistent-ips %s (%s): kubectl apply --server-side -f install.yaml\n' "$version" "$revision"
  printf '# Rendered from manifests/default. The IPAMClaim CRD is in ipamclaim-crd.yaml, for clusters without it.\n'
  "$kubectl" kustomize "$overlay"
} >"$out/install.yaml"
grep -q "image: $image_ref\$" "$out/install.yaml" || die "install.yaml does not pin $image_ref"
if grep -E '^\s+image: ' "$out/install.yaml" | grep -v "image: $image_ref\$"; then die "install.yaml names another image (above)"; fi
"$kubectl" kustomize manifests/ipamclaim-crd >"$out/ipamclaim-crd.yaml"
log "install.yaml: $(grep -c '^kind: ' "$out/install.yaml") objects, image $image_ref"

# --- Helm chart -------------------------------------------------------------------------------------------------
helm="${HELM:-$(scripts/helm/build.sh --check 2>/dev/null || true)}"
if [ -n "$helm" ] && [ -x "$helm" ]; then
  chart_dir="$(mktemp -d)"
  # -L: the chart's files/ are links into manifests/ (one copy of the CRD, the alert rules and the dashboard); the
  # packaged chart holds their contents.
  cp -RL charts/persistent-ips "$chart_dir/"
  "$helm" package "$chart_dir/persistent-ips" --version "$version" --app-version "$version" -d "$chart_dir" >/dev/null
  mv "$chart_dir/persistent-ips-$version.tgz" "$out/persistent-ips-chart-$version.tgz"
  rm -rf "$chart_dir"
  log "Helm chart: persistent-ips-chart-$version.tgz"
else
  log "no helm binary (scripts/helm/build.sh builds one): Helm chart not packaged"
fi

# --- container image --------------------------------------------------------------------------------------------
if [ $image = 1 ]; then
  # Built first (once per machine; minutes): a release with an image has its SBOMs.
  syft="${SYFT:-$(scripts/syft/build.sh | tail -n1)}"
  archive="$out/persistent-ips-$version.oci.tar"
  scripts/image/build.sh --out "$archive" --version "$version" --revision "$revision"
  scripts/image/inspect.sh "$archive" >"$out/image-contents.txt" || { cat "$out/image-contents.txt" >&2; die "the image failed its checks"; }
  log "image: $(head -n1 "$out/image-contents.txt")"
  platforms="$(scripts/image/unpack.sh --platforms "$archive" | tr '\n' ' ')"
  [ "$platforms" = "linux/amd64 linux/arm64 " ] || die "the image index holds ${platforms:-no image}, not linux/amd64 and linux/arm64"
  for platform in $platforms; do
    arch="${platform#*/}"
    sbom="$out/persistent-ips-$version.image-$arch.cdx.json"
    # No network: no update check; the archive is read where it is.
    SYFT_CHECK_FOR_APP_UPDATE=false "$syft" scan --quiet --platform "$platform" --select-catalogers +sbom-cataloger \
      --source-name "$image_ref" --source-version "v$version" -o "cyclonedx-json=$sbom" "oci-archive:$archive"
    # Checked against the image's own lists of its Debian packages and bundled packages.
    unpacked="$(mktemp -d)"
    scripts/image/unpack.sh "$archive" "$unpacked" "$arch"
    "$node_bin" scripts/image/sbom-check.ts "$sbom" "$unpacked/rootfs/usr/share/doc/debian-packages" \
      "$unpacked/rootfs/app/dist/THIRD-PARTY-NOTICES.txt" >&2 || die "the $platform image's SBOM misses what the image holds (above)"
    rm -rf "$unpacked"
  done
fi

(cd "$out" && sha256sum -- * | grep -v ' SHA256SUMS$' >SHA256SUMS)
log "done in $(($(date +%s) - start)) s:"
ls -l "$out" >&2
