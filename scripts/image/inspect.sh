#!/usr/bin/env bash
# scripts/image/inspect.sh ARCHIVE: size, configuration and contents of an OCI archive, as text (release notes,
# image-contents.txt of a release). Needs no container runtime.
set -euo pipefail
archive="${1:?usage: inspect.sh ARCHIVE}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$here/unpack.sh" "$archive" "$work"
r="$work/rootfs"
printf '%s: %s compressed (the archive), %s unpacked, %s files\n' "$(basename "$archive")" \
  "$(du -h "$archive" | cut -f1)" "$(du -sh "$r" | cut -f1)" "$(find "$r" -type f | wc -l)"
python3 - "$work/config.json" <<'PY'
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
(cd "$r" && du -sh usr/local/bin/node lib lib64 usr/lib app/dist app/package.json app/LICENSE etc tmp usr/share/doc 2>/dev/null)
echo
echo "libraries:"
(cd "$r" && find lib lib64 usr/lib -type f -o -type l | sort | sed 's/^/  /')
echo
echo "Debian packages:"
sed 's/^/  /' "$r/usr/share/doc/debian-packages" 2>/dev/null || true
echo
echo "packages bundled into app/dist (app/dist/THIRD-PARTY-NOTICES.txt):"
grep -E '^[^ ]+@[0-9][^ ]* \(.*\)$' "$r/app/dist/THIRD-PARTY-NOTICES.txt" | sed 's/^/  /'
[ ! -e "$r/app/node_modules" ] || echo "app/node_modules: present (unexpected: the bundle needs none)"
echo
echo "node: $(chroot "$r" /usr/local/bin/node --version 2>/dev/null || echo '(not run: chroot needs root)')"
