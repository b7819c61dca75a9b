"""Attack: at its import, keep the GPU busy from a thread of its own (spins of
5 ms, back to back) so that whatever a classmate times meanwhile runs slower.
Stopped by: a Python submission's import holds the GPU as the sanitizer does,
its worker (and the thread) ends with each stage, and timing holds the GPU
alone; it only slows its own batches."""

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


def _hog():
    with cp.cuda.Stream(non_blocking=True) as stream:
        while True:
            _SPIN((132,), (32,), (cp.uint64(5_000_000),), stream=stream)
            stream.synchronize()


threading.Thread(target=_hog, daemon=True).start()


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
