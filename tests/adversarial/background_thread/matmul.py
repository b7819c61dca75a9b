"""Adversarial (tests/adversarial/README.md): an honest product, and a thread
started at import that keeps the GPU busy (1 ms spins, back to back) so that
whatever is timed next, the library above all, runs slower. Caught by:
CUPTI, which names work from another thread inside the library's window and
refuses the series."""

import threading

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


def _keep_busy():
    with cp.cuda.Stream(non_blocking=True) as stream:
        while True:
            _SPIN((1,), (1,), (cp.uint64(1_000_000),), stream=stream)
            stream.synchronize()


threading.Thread(target=_keep_busy, daemon=True).start()


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
