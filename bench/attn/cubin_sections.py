#!/usr/bin/env python3
# Per-kernel section sizes and sha256 of CUDA cubins (ELF64), to prove a source change kept the machine code: python3 bench/attn/cubin_sections.py a.cubin [b.cubin ...] > listing.txt
"""Prints one line per section named .text.<kernel>, .nv.info.<kernel>, .nv.shared.<kernel> or
.nv.constant0.<kernel> of every cubin given: `<section> <size> <sha256>`, sorted by name (kernels
may move between files: compare two listings with diff). Anonymous-namespace names carry a
per-file tag (<n>_GLOBAL__N__<hex>_<len>_<file>_<hex>); --normalize writes it 11_GLOBAL__N_ so
that a kernel moved to another file keeps its name, and hashes .nv.info without the symbol-table
index it holds (EIATTR_PARAM_CBANK), which moves when the file holds other kernels. .nv.shared
and .nv.constant0 are NOBITS or hold launch-time data: their size is what matters (sha256 of
NOBITS is of no bytes).
Standard library only (no cuobjdump needed). Make a cubin with the build's nvcc command for the
file (ninja -C build-cuda -t commands <target.o>), `-c -o x.o` replaced by `-cubin -o x.cubin`
and a single code target (sm_90, or sm_90a for *_sm90a.cu)."""
import hashlib
import re
import struct
import sys

PREFIXES = (".text.", ".nv.info.", ".nv.shared.", ".nv.constant0.")
ANON = re.compile(r"(\d+)_GLOBAL__N__")
SHT_NOBITS = 8


def sections(path, normalize=False):
    """(name, size, sha256 hex) of every section of the ELF64 little-endian file at path
    (normalize: .nv.info.* without the symbol index, info_without_sym_index)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit(f"{path}: not an ELF64 little-endian file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    str_off = heads[shstrndx][4]
    out = []
    for name_off, sh_type, _flags, _addr, off, size, *_ in heads:
        end = data.index(b"\0", str_off + name_off)
        name = data[str_off + name_off:end].decode()
        body = b"" if sh_type == SHT_NOBITS else data[off:off + size]
        if normalize and name.startswith(".nv.info."):
            body = info_without_sym_index(body)
        out.append((name, size, hashlib.sha256(body).hexdigest()))
    return out


def info_without_sym_index(body):
    """.nv.info attributes (format byte, attribute byte, then by format: none, 2 bytes, or a u16
    size and that many bytes) with the symbol-table index in EIATTR_PARAM_CBANK (0x0a) zeroed:
    the index is the .nv.constant0 symbol's place in the file, which moves with the other kernels
    of the file"""
    out, i = bytearray(body), 0
    while i + 2 <= len(body):
        fmt, attr = body[i], body[i + 1]
        if fmt == 4:
            size, = struct.unpack_from("<H", body, i + 2)
            if attr == 0x0A and size >= 4:
                out[i + 4:i + 8] = b"\0\0\0\0"
            i += 4 + size
        elif fmt in (2, 3):
            i += 4
        else:
            i += 2
    return bytes(out)


def normalized(name):
    """name with each length-prefixed anonymous-namespace tag <len>_GLOBAL__N__... as 11_GLOBAL__N_"""
    out, pos = [], 0
    for m in ANON.finditer(name):
        if m.start() < pos:
            continue
        out.append(name[pos:m.start()] + "11_GLOBAL__N_")
        pos = m.start(1) + len(m.group(1)) + int(m.group(1))
    return "".join(out) + name[pos:]


def main(argv):
    normalize = "--normalize" in argv
    paths = [a for a in argv if a != "--normalize"]
    if not paths:
        raise SystemExit(__doc__)
    rows = []
    for p in paths:
        for name, size, digest in sections(p, normalize):
            if name.startswith(PREFIXES):
                rows.append((normalized(name) if normalize else name, size, digest))
    for name, size, digest in sorted(rows):
        print(f"{name} {size} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
