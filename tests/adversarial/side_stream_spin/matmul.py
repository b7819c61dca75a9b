"""Adversarial (tests/adversarial/README.md): the product on the given stream,
then a 3 ms kernel left spinning on a stream of its own. Timed by events on
the given stream alone, the spin is free, and a library timed next waits
behind it (issue 48: 5.2x cuBLAS). Caught by: CUPTI, which sees the spin end
after the end event (counted in the time, named), and the device
synchronised after every sample (the library never waits behind it)."""

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
