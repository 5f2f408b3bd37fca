#!/usr/bin/env python3
"""check-rootfs.py ROOTFS ARCH (amd64, arm64): the unpacked image of one platform holds what the controller needs, and
node and every shared library are 64-bit little-endian ELF files for ARCH (e_machine), node's loader (PT_INTERP) in the
image. Prints what it checked; exits 1, with a PROBLEM line each, when something is wrong. (scripts/image/inspect.sh)"""
import os, struct, sys
root, arch = sys.argv[1], sys.argv[2]
want = {"amd64": (62, "x86-64"), "arm64": (183, "AArch64")}[arch]
problems = []
for f in ("usr/local/bin/node", "app/dist/cli/main.js", "app/dist/cli/mint-worker.js", "app/dist/THIRD-PARTY-NOTICES.txt",
          "app/dist/persistent-ips.cdx.json", "app/package.json", "etc/passwd", "etc/group", "etc/os-release",
          "var/lib/dpkg/status.d/libc6", "var/lib/dpkg/status.d/libstdc++6", "usr/share/doc/node/LICENSE"):
    if not os.path.isfile(os.path.join(root, f)):
        problems.append(f"missing /{f}")
if os.path.exists(os.path.join(root, "app/node_modules")):
    problems.append("/app/node_modules is present (the bundle needs none)")
def elf(path):
    with open(path, "rb") as fh:
        head = fh.read(64)
    if head[:4] != b"\x7fELF":
        return None
    if head[4] != 2 or head[5] != 1:
        return ("not 64-bit little-endian", None)
    machine = struct.unpack_from("<H", head, 18)[0]
    return (machine, head)
def interp(path):
    with open(path, "rb") as fh:
        data = fh.read(1 << 16)
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 3:
            with open(path, "rb") as fh:
                fh.seek(p_offset)
                return fh.read(p_filesz).rstrip(b"\0").decode()
    return None
def in_image(path):
    """The file a path names inside the image, its symbolic links followed within the image; None if there is none."""
    p = path.lstrip("/")
    for _ in range(40):
        full = os.path.join(root, p)
        if not os.path.islink(full):
            return full if os.path.isfile(full) else None
        t = os.readlink(full)
        p = t.lstrip("/") if t.startswith("/") else os.path.normpath(os.path.join(os.path.dirname(p), t))
    return None
checked = []
for top in ("usr/local/bin", "lib", "lib64", "usr/lib"):
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        for n in names:
            p = os.path.join(dirpath, n)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            e = elf(p)
            rel = os.path.relpath(p, root)
            if e is None:
                if top != "usr/local/bin" and ".so" in n:
                    problems.append(f"/{rel} is not an ELF file")
                continue
            if e[0] != want[0]:
                problems.append(f"/{rel}: ELF e_machine {e[0]}, not {want[0]} ({want[1]})")
            checked.append(rel)
node = os.path.join(root, "usr/local/bin/node")
if os.path.isfile(node) and elf(node):
    loader = interp(node)
    if loader is None or in_image(loader) is None:
        problems.append(f"node's loader {loader} is not in the image")
    else:
        print(f"node's loader (PT_INTERP): {loader}")
print(f"ELF check: {len(checked)} files, all {want[1]} (e_machine {want[0]})" if not any("e_machine" in p for p in problems) else "ELF check: FAILED")
for p in problems:
    print(f"PROBLEM: {p}")
sys.exit(1 if problems else 0)
