"""Adversarial, graded (tests/adversarial/README.md): replaces the grader's
synchronisation in its own process with nothing, so its call answers while
its GPU work (20 ms of it) still runs, and the grader's clock stops early
(issue 48: graded as verified, with nothing checking that the work had
ended). Caught by: the check right after the answer, which finds C
unfinished and then right a moment later."""

import sys

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
_apart = sys.modules.get("gemmlab.measure.apart")
if _apart is not None:
    _apart._CHILD["synchronize"] = lambda: None


def matmul(A, B, C):
    _SPIN((1,), (1,), (cp.uint64(20_000_000),), stream=cp.cuda.get_current_stream())
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
