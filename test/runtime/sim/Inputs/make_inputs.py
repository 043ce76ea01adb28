"""Writes random inputs for a kernel: make_inputs.py KERNEL OUT.npz"""
import sys

import numpy as np

kernel, out = sys.argv[1:3]
rng = np.random.default_rng(7)
f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
if kernel == "tiled_matmul":
    np.savez(out, a_t=f32(256, 128), b=f32(256, 256))
elif kernel == "softmax_rows":
    np.savez(out, x=3 * f32(128, 512))
elif kernel == "double_buffered_elementwise":
    np.savez(out, x=f32(128, 2048))
elif kernel == "dropout_uniform":
    np.savez(out, seed=np.array([-123456789], dtype=np.int32))
elif kernel == "embedding_gather":
    np.savez(out, ids=rng.integers(0, 1000, 128).astype(np.int32), w=f32(1000, 64))
elif kernel == "embedding_gather_out_of_range":
    ids = rng.integers(0, 1000, 128).astype(np.int32)
    ids[37] = 1000
    np.savez(out, ids=ids, w=f32(1000, 64))
