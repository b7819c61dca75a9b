"""The clock and power a kernel holds under sustained load, beside its library
baseline (about 1 minute on an H200).

For each (kernel, N): 3 s of back-to-back launches of the kernel, then 3 s of
its baseline (cuBLAS), then both again, 1 s idle before each; NVML samples
the SM clock and the board power every 20 ms, and the last two thirds of each
phase are averaged (the first third is the ramp). It answers whether a
kernel is slower than the library because the GPU clocks it lower (power)
or because it does less per clock. Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/sustained_clocks.py OUT.json
"""

from __future__ import annotations

import json
import sys
import threading
import time

from gemmlab.backends.nvrtc import bind, compile_kernel
from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue

CASES = (("sgemm_multistage", 8192, None), ("sgemm_lean_loop", 8192, None), ("tc_cluster", 8192, "bfloat16"))
PHASE_S = 3.0


def _sampled(handle, fn, stream, seconds: float) -> dict:
    """Launch fn back to back for `seconds`; the rate and the NVML samples of that time."""
    import pynvml

    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
            samples.append((clock, pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start, launches = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            fn()
        launches += 10
        stream.synchronize()
    elapsed = time.perf_counter() - start
    stop.set()
    sampler.join()
    late = samples[len(samples) // 3 :]
    return {
        "launches_per_s": launches / elapsed,
        "clock_mhz": sum(c for c, _ in late) / len(late),
        "clock_min_mhz": min(c for c, _ in late),
        "clock_max_mhz": max(c for c, _ in late),
        "power_w": sum(p for _, p in late) / len(late),
    }


def measure(kernel_id: str, n: int, dtype: str | None) -> dict:
    import pynvml
    from cuda.core import Device

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    point = catalogue.point(kernel_id, Shape.square(n), None, dtype)
    cp, info = gpu.cupy(), gpu.describe(0)
    compiled = compile_kernel(point.spec, point.block_edge, point.dtype, point.spec.compile_arch(info.arch))
    Device(0).set_current()
    cp_stream = cp.cuda.Stream(non_blocking=True)
    phases = {}
    with cp_stream:
        prepared, ours, _ = bind(cp, point, compiled, info, 0, cp_stream, 1)
        for name, fn in (("kernel", ours), ("baseline", prepared.baseline), ("kernel2", ours),
                         ("baseline2", prepared.baseline)):  # fmt: skip
            fn()
            cp_stream.synchronize()
            time.sleep(1.0)
            phase = _sampled(handle, fn, cp_stream, PHASE_S)
            phase["tflops"] = point.flops * phase["launches_per_s"] / 1e12
            phases[name] = phase
            print(kernel_id, n, name, {k: round(v, 1) for k, v in phase.items()}, flush=True)
    return {"kernel": kernel_id, "n": n, "dtype": point.dtype, "baseline": prepared.baseline_name, "phases": phases}


def main() -> None:
    out = {"device": gpu.describe(0).to_dict(), "cases": [measure(*case) for case in CASES]}
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
