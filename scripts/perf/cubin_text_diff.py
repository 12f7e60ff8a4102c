#!/usr/bin/env python3
"""Whether two builds compiled the same machine code: compare the `.text.*` sections (SASS)
of the cubins two `vnni-dispatch preflight --static --cache DIR` runs left in their caches,
module by module (one decode module per codebook, plus the common one). Other sections
(symbol tables, per-kernel info) differ whenever a module gains kernels and are ignored.

    cubin_text_diff.py OLD_CACHE NEW_CACHE
Prints per module the kernels compared and those whose code differs; exit 1 if any differs
or an old module has no counterpart.
"""
import os
import re
import struct
import sys


def sections(blob):
    """Name -> bytes of an ELF64 little-endian file's sections (SHT_NOBITS left out)."""
    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]
    out = {}
    for name_off, kind, _, _, offset, size, *_ in headers:
        name = blob[names_at + name_off : blob.index(b"\0", names_at + name_off)].decode()
        if kind != 8:
            out[name] = blob[offset : offset + size]
    return out


def modules(cache):
    found = {}
    for f in sorted(os.listdir(cache)):
        if f.endswith(".cubin"):
            blob = open(os.path.join(cache, f), "rb").read()
            codebook = re.search(rb"vnni_(?:tile|fused|grouped_rows|grouped_mma16|prefill)_([a-z0-9]+?)_", blob)
            found[codebook.group(1).decode() if codebook else "common"] = sections(blob)
    return found


old, new = modules(sys.argv[1]), modules(sys.argv[2])
bad = False
for module, texts in sorted(old.items()):
    if module not in new:
        print(f"{module}: no module in {sys.argv[2]}")
        bad = True
        continue
    kernels = [k for k in texts if k.startswith(".text.")]
    differ = [k for k in kernels if new[module].get(k) != texts[k]]
    bad |= bool(differ)
    print(f"{module}: {len(kernels)} kernels, {len(kernels) - len(differ)} identical" + (f", differ: {differ}" if differ else ""))
for module in sorted(set(new) - set(old)):
    print(f"{module}: new ({sum(k.startswith('.text.') for k in new[module])} kernels)")
sys.exit(1 if bad else 0)
