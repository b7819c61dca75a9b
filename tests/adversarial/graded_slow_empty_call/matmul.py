"""Adversarial, graded (tests/adversarial/README.md): replaces, in its own
process, the functions the grader calls to time an empty round trip, so
that more is subtracted from each batch (issue 48: 1.44x cuBLAS from an
honest 0.74x). Caught by: the empty round trip is timed before the
submission is imported."""

import sys
import time

import cupy as cp

_apart = sys.modules.get("gemmlab.measure.apart")
if _apart is not None:
    for _name in ("child_ping", "child_idle"):
        setattr(_apart, _name, lambda *args, **kwargs: time.sleep(0.005))
    _sync = _apart._CHILD.get("synchronize")
    if _sync is not None:
        _apart._CHILD["synchronize"] = lambda: (time.sleep(0.005), _sync())


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
