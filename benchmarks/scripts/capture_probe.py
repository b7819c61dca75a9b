"""Can the cuBLAS baselines be captured into a CUDA graph, and how far do 50
back-to-back Python calls differ from a replayed graph of 50? A probe for the
short-problem timing (measure/run.py _short_pair); prints what it finds.

    PYTHONPATH=src python3 benchmarks/scripts/capture_probe.py
"""

from __future__ import annotations

import traceback

import cupy as cp
import numpy as np

from gemmlab.problems import matmul as mm
from gemmlab.problems import tensor as tp

COUNT = 50


def capture(stream, fn, mode=None):
    stream.begin_capture() if mode is None else stream.begin_capture(mode)
    try:
        for _ in range(COUNT):
            fn()
    except BaseException:
        try:
            stream.end_capture()
        except Exception:
            pass
        raise
    return stream.end_capture()


def timed(stream, fn, reps=20):
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    out = []
    for _ in range(reps):
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop) / COUNT * 1e3)
    return float(np.median(out))


def probe(name, make):
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        call, check = make()
        call()
        stream.synchronize()
        for label, mode in (("global", None), ("relaxed", cp.cuda.runtime.streamCaptureModeRelaxed)):
            try:
                graph = capture(stream, call, mode)
            except Exception as e:
                print(f"{name}: capture ({label}) failed: {type(e).__name__}: {e}")
                traceback.print_exc(limit=3)
                continue
            ok = check(lambda graph=graph: graph.launch(stream))
            us_graph = timed(stream, lambda graph=graph: graph.launch(stream))

            def b2b():
                for _ in range(COUNT):
                    call()

            us_b2b = timed(stream, b2b)
            print(
                f"{name}: capture ({label}) works, result right: {ok}; per call: graph {us_graph:.2f} us, "
                f"back-to-back {us_b2b:.2f} us"
            )
            break


def sgemm(n):
    def make():
        a = cp.random.rand(n, n, dtype=cp.float32)
        b = cp.random.rand(n, n, dtype=cp.float32)
        c = cp.zeros((n, n), cp.float32)
        call = mm.cublas_gemm(cp, a, b, c, "float32", 1.0, 0.0)

        def check(replay):
            c[...] = 0
            replay()
            cp.cuda.get_current_stream().synchronize()
            return bool(cp.allclose(c, a @ b, rtol=1e-4, atol=1e-3))

        return call, check

    return make


def bf16(n, dtype):
    def make():
        x = cp.random.rand(n, n, dtype=cp.float32)
        bits = (x.view(cp.uint32) >> 16).astype(cp.uint16)
        c = cp.zeros((n, n), cp.uint16 if dtype == tp.BF16_OUT else cp.float32)
        call = tp.cublas_gemm(cp, bits, bits, c, dtype)

        def check(replay):
            c[...] = 0
            replay()
            cp.cuda.get_current_stream().synchronize()
            return bool(cp.any(c != 0))

        return call, check

    return make


if __name__ == "__main__":
    print(
        cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "cuBLAS",
        cp.cuda.cublas.getVersion(cp.cuda.device.get_cublas_handle()),
    )
    for n in (256, 512, 1024):
        probe(f"sgemm {n}", sgemm(n))
        probe(f"bfloat16 {n}", bf16(n, "bfloat16"))
        probe(f"bfloat16-out {n}", bf16(n, tp.BF16_OUT))
