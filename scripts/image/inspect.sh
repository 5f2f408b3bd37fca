#!/usr/bin/env bash
# scripts/image/inspect.sh ARCHIVE: size, platforms, configuration and contents of an OCI archive (an image index of
# one image per platform, or one image), as text (release notes, image-contents.txt of a release). Needs no container
# runtime. It also checks each platform's image, and exits non-zero when one fails: the files the controller needs are
# there, and node and every shared library are ELF files of that platform's architecture (e_machine), with node's
# loader (PT_INTERP) in the image. The CLI is run where the machine can: natively under chroot (root), another
# architecture under qemu-user-static when installed.
set -euo pipefail
archive="${1:?usage: inspect.sh ARCHIVE}"
# The machine's extra CA bundle is not in the image: node would warn about it on every run.
unset NODE_EXTRA_CA_CERTS
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
platforms="$("$here/unpack.sh" --platforms "$archive")"
printf '%s: %s (the archive), platforms %s\n' "$(basename "$archive")" "$(du -h "$archive" | cut -f1)" "$(echo $platforms | sed 's/ /, /g')"
failed=0
for platform in $platforms; do
  arch="${platform#*/}"
  "$here/unpack.sh" "$archive" "$work/$arch" "$arch"
  r="$work/$arch/rootfs"
  echo
  echo "=== $platform: $(du -sh "$r" | cut -f1) unpacked, $(find "$r" -type f | wc -l) files"
  python3 - "$work/$arch/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
cfg = c.get("config", {})
print(f'architecture {c.get("architecture")}/{c.get("os")}, created {c.get("created")}')
for k in ("User", "WorkingDir", "Entrypoint", "Cmd", "Env", "ExposedPorts"):
    v = cfg.get(k)
    print(f'{k}: {", ".join(v) if isinstance(v, (list, dict)) else v}')
for k, v in sorted(cfg.get("Labels", {}).items()):
    print(f'label {k}={v}')
PY
  echo
  echo "contents (du, unpacked):"
  (cd "$r" && du -sh usr/local/bin/node lib lib64 usr/lib app/dist app/package.json app/LICENSE etc tmp usr/share/doc var/lib/dpkg 2>/dev/null || true)
  echo
  echo "libraries:"
  (cd "$r" && { find lib lib64 usr/lib -type f -o -type l 2>/dev/null || true; } | sort | sed "s/^/  /")
  echo
  # The checks: every file the entrypoint needs, and ELF headers of this architecture.
  python3 "$here/check-rootfs.py" "$r" "$arch" || failed=1
  echo
  echo "Debian packages:"
  sed 's/^/  /' "$r/usr/share/doc/debian-packages" 2>/dev/null || true
  echo
  echo "packages bundled into app/dist (app/dist/THIRD-PARTY-NOTICES.txt, app/dist/persistent-ips.cdx.json):"
  grep -E '^[^ ]+@[0-9][^ ]* \(.*\)$' "$r/app/dist/THIRD-PARTY-NOTICES.txt" | sed 's/^/  /'
  echo
  # The entrypoint's code loads and the CLI answers: natively under chroot (root), another architecture under
  # qemu-user-static (-L: the loader and libraries are the image's).
  qemu="qemu-$( [ "$arch" = arm64 ] && echo aarch64 || echo x86_64 )-static"
  if [ "$arch" = "$(dpkg --print-architecture 2>/dev/null)" ] && [ "$(id -u)" = 0 ]; then
    run=(chroot "$r" /usr/local/bin/node) how="chroot" app=/app
  elif command -v "$qemu" >/dev/null; then
    run=("$qemu" -L "$r" "$r/usr/local/bin/node") how="$qemu" app="$r/app"
  else
    run=() how=""
  fi
  # main.js parses its command line in a child process of the same node binary (src/child/json-child.ts), which
  # qemu-user cannot start without binfmt_misc: under emulation the parsing child itself is asked for the help text.
  help_runs() {
    if [ "$how" = chroot ]; then
      "${run[@]}" "$app/dist/cli/main.js" --help >/dev/null
    else
      echo '{"argv":["--help"],"width":100}' | "${run[@]}" "$app/dist/cli/parse-worker.js" | grep -q 'persistent-ips run'
    fi
  }
  if [ ${#run[@]} -eq 0 ]; then
    echo "node: not run (no $qemu here, or not root)"
  elif v="$("${run[@]}" -p 'process.version + " " + process.arch')" && help_runs; then
    echo "node ($how): $v; the CLI's --help runs"
  else
    echo "PROBLEM: node ($how) does not run, or dist/cli/main.js --help fails"
    failed=1
  fi
  rm -rf "${work:?}/$arch"
done
[ $failed = 0 ] || { echo "inspect.sh: $archive: an image failed its checks (PROBLEM lines above)" >&2; exit 1; }
