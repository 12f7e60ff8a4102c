#!/usr/bin/env python3
"""gguf-py as an oracle for the Rust codecs.

    gguf_oracle.py types                       -> JSON {name: [ggml_type, block_elems, block_bytes]}
    gguf_oracle.py dequantize FORMAT IN OUT    raw GGUF blocks -> little-endian f32
    gguf_oracle.py quantize FORMAT IN OUT      little-endian f32 -> raw GGUF blocks
"""
import json
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants


def qtype(name):
    return GGMLQuantizationType[name]


def main(argv):
    if argv[1] == "types":
        names = sys.stdin.read().split()
        out = {}
        for n in names:
            t = qtype(n)
            out[n] = [int(t), *GGML_QUANT_SIZES[t]]
        json.dump(out, sys.stdout)
        return 0
    op, name, src, dst = argv[1:5]
    t = qtype(name)
    if op == "dequantize":
        data = np.fromfile(src, dtype=np.uint8)
        y = quants.dequantize(data.reshape(1, -1), t)
        y.astype("<f4").tofile(dst)
    elif op == "quantize":
        x = np.fromfile(src, dtype="<f4")
        q = quants.quantize(x.reshape(1, -1), t)
        q.astype(np.uint8).tofile(dst)
    else:
        print(f"unknown operation {op}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
