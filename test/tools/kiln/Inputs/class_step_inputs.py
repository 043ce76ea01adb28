"""Inputs for class_step.mlir with row 4's label given: class_step_inputs.py LABEL OUT.npz"""
import sys

import numpy as np

label, out = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(3)
y = np.array([0, 1, 2, 3, 0, 2, 3, 1], np.int32)
y[4] = label
np.savez(out, x=rng.standard_normal((8, 16)).astype(np.float32), y=y,
         w=(0.1 * rng.standard_normal((4, 16))).astype(np.float32))
