"""Kiln's dropout random numbers on the host, bit for bit.

A compiled step's dropout number `stream` (dropouts are numbered in trace
order, from 0) keeps element `i` (row-major) when `uniform(seed, stream, i)
>= p`, where the step's seed is `kiln.distributed.worker_seed(seed, rank,
step)` (and, for a dropout of an activation a tensor-parallel group splits,
`kiln.distributed.shard_seed` of it and the worker's shard). The device,
the reference interpreter and these functions compute the same numbers, so
an eager PyTorch run can reproduce a compiled step's masks: to check a
divergence, or as the reference of a test.

    mask = kiln.rng.dropout_mask(step_seed, stream, x.shape, p)
    y = x * mask / (1 - p)
"""

import numpy as np
import torch

_MASK64 = (1 << 64) - 1
COUNTERS_PER_STREAM = 1 << 40


def _mix(z):
    """SplitMix64's finaliser on a uint64 array (numpy wraps on overflow)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform(seed, stream, shape):
    """The uniform numbers in [0, 1) (24 random bits) of one dropout, as a
    float64 tensor of `shape`."""
    count = int(np.prod(shape, dtype=np.int64))
    if count >= COUNTERS_PER_STREAM:
        raise ValueError(f"a dropout of {count} elements overruns its stream")
    key = int(_mix(np.array([int(seed) & _MASK64], dtype=np.uint64))[0])
    first = (key + int(stream) * COUNTERS_PER_STREAM) & _MASK64
    counters = np.arange(count, dtype=np.uint64) + np.uint64(first)
    bits = _mix(counters) >> np.uint64(40)
    return torch.from_numpy((bits.astype(np.float64) * 2.0 ** -24).reshape(tuple(shape)))


def dropout_mask(seed, stream, shape, p):
    """The keep-mask (a bool tensor) of dropout `stream` with probability `p`."""
    return uniform(seed, stream, shape) >= p
