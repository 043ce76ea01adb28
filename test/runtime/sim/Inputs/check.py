"""Compares a kiln run's outputs with NumPy. Usage:
check.py KERNEL INPUTS.npz OUTPUTS.npz
Prints 'ok' or the first mismatch; the tolerance is 1e-5 relative (f32)."""
import sys

import numpy as np

kernel, inputs, outputs = sys.argv[1:4]
x = np.load(inputs)
y = np.load(outputs)
if kernel == "tiled_matmul":
    want = x["a_t"].T.astype(np.float64) @ x["b"].astype(np.float64)
    got = y["c"]
elif kernel == "softmax_rows":
    v = x["x"].astype(np.float64)
    e = np.exp(v - v.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    got = y["y"]
elif kernel == "double_buffered_elementwise":
    want = np.maximum(2 * x["x"].astype(np.float64) + 1, 0)
    got = y["y"]
elif kernel == "dropout_uniform":
    # Bit for bit what kiln.rng (and the reference interpreter) draw.
    import kiln.rng
    all_of_stream = kiln.rng.uniform(int(x["seed"][0]), 3, (128, 64)).numpy()
    print("ok" if np.array_equal(y["u"], all_of_stream) else "differs from kiln.rng")
    sys.exit(0)
elif kernel == "embedding_gather":
    # Rows are copied, not computed: bit for bit.
    print("ok" if np.array_equal(y["y"], x["w"][x["ids"]]) else "rows differ")
    sys.exit(0)
else:
    sys.exit("unknown kernel " + kernel)
err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
print("ok" if err <= 1e-5 and not np.isnan(got).any() else "relative error %g" % err)
