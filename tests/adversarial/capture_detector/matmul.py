"""Adversarial (tests/adversarial/README.md): a short product is timed from a
CUDA graph; this one asks whether the stream is capturing and, if so,
records nothing, so the graph's replays cost nothing. Caught by: every
launch of a replay runs on an input set of its own, poisoned before and
checked after (C is still NaN)."""

import cupy as cp


def matmul(A, B, C):
    if cp.cuda.get_current_stream().is_capturing():
        return
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
