"""Adversarial, graded (tests/adversarial/README.md): as side_stream_spin, in
a submission graded at arm's length: the spin it leaves behind once held the
GPU while the grader timed cuBLAS (issue 48: 5.2x cuBLAS). Caught by: the
library is timed only after the submission's process and everything it
started have ended."""

import cupy as cp

_SPIN = cp.RawKernel(
    r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
""",
    "spin",
)
_SIDE = cp.cuda.Stream(non_blocking=True)


def matmul(A, B, C):
    cp.matmul(A, B, out=C)
    _SPIN((1,), (1,), (cp.uint64(3_000_000),), stream=_SIDE)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
