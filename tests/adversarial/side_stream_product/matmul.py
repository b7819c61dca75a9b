"""Adversarial (tests/adversarial/README.md): the whole product on a stream of
its own, returned from without waiting: events on the given stream time
nothing. Caught by: CUPTI (the product is the call's work on any stream, and
ends after the end event: counted), and the check after the device is
synchronised."""

import cupy as cp

_SIDE = cp.cuda.Stream(non_blocking=True)


def matmul(A, B, C):
    with _SIDE:
        cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
