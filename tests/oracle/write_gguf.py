#!/usr/bin/env python3
"""Write a small GGUF model with gguf-py's GGUFWriter (for the inventory import test).

    write_gguf.py OUT.gguf
Tensors: two layers of attn_q (64 x 256, Q4_K), ffn_down (96 x 512, Q8_0) and
ffn_up_exps (4 experts of 128 x 256, MXFP4, one 3-D tensor each), attn_k (32 x 256, Q3_K),
attn_output (40 x 256, IQ3_XXS), ffn_gate (48 x 256, IQ3_S), ffn_up (56 x 256, Q2_K),
ffn_down_shexp (72 x 256, IQ2_XXS), ffn_gate_shexp (80 x 256, IQ1_M), output (320 x 256, Q6_K), and two matrices import must name and skip: an F32 token embedding
and a TQ1_0 attn_v (a ternary type no codec here reads).
"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T


def quantized(n, k, t, experts=None):
    block, size = gguf.GGML_QUANT_SIZES[t]
    shape = (n, k // block * size) if experts is None else (experts, n, k // block * size)
    return np.zeros(shape, dtype=np.uint8)


w = gguf.GGUFWriter(sys.argv[1], "llama")
w.add_name("tiny-model")
w.add_block_count(2)
w.add_array("tiny.list", [1, 2, 3])
for i in range(2):
    w.add_tensor(f"blk.{i}.attn_q.weight", quantized(64, 256, T.Q4_K), raw_dtype=T.Q4_K)
    w.add_tensor(f"blk.{i}.ffn_down.weight", quantized(96, 512, T.Q8_0), raw_dtype=T.Q8_0)
    w.add_tensor(f"blk.{i}.ffn_up_exps.weight", quantized(128, 256, T.MXFP4, experts=4), raw_dtype=T.MXFP4)
w.add_tensor("blk.0.attn_k.weight", quantized(32, 256, T.Q3_K), raw_dtype=T.Q3_K)
w.add_tensor("blk.0.attn_output.weight", quantized(40, 256, T.IQ3_XXS), raw_dtype=T.IQ3_XXS)
w.add_tensor("blk.0.ffn_gate.weight", quantized(48, 256, T.IQ3_S), raw_dtype=T.IQ3_S)
w.add_tensor("blk.0.ffn_up.weight", quantized(56, 256, T.Q2_K), raw_dtype=T.Q2_K)
w.add_tensor("blk.0.ffn_down_shexp.weight", quantized(72, 256, T.IQ2_XXS), raw_dtype=T.IQ2_XXS)
w.add_tensor("blk.0.ffn_gate_shexp.weight", quantized(80, 256, T.IQ1_M), raw_dtype=T.IQ1_M)
w.add_tensor("blk.0.attn_v.weight", quantized(32, 256, T.TQ1_0), raw_dtype=T.TQ1_0)
w.add_tensor("output.weight", quantized(320, 256, T.Q6_K), raw_dtype=T.Q6_K)
w.add_tensor("token_embd.weight", np.zeros((320, 256), dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
