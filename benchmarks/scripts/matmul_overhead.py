"""What one call of ``gemmlab.matmul`` costs the host, beside the kernel it launches.

The distributed ladder calls gemmlab.matmul once per local GEMM (twice per step of
the ring), so a host path slower than the kernel leaves the GPU idle. Per size
(bfloat16 in, float32 C, the default rung), three figures, each the median of
--rounds rounds of --calls calls:

- ``host_us``: the host's time per call, the calls issued back to back with no
  synchronisation;
- ``kernel_us``: the GPU's time per call when they run back to back: CUDA
  events around the calls, queued behind a 50 ms wait on the GPU so that the
  host has queued them all before the first starts;
- ``queued_us``: the GPU's time per call as it sees them arrive: the same events
  with no wait first, so where the host is the slower side the GPU idles
  between kernels and this is about ``host_us``.

Four ways of calling are measured:

- ``matmul``: ``gemmlab.matmul(a, bt.T)``, as a user calls it;
- ``matmul-replan``: the same with the launch plan cleared before each call,
  i.e. the catalogue point and the resident grid worked out every call, as
  gemmlab.matmul did before it kept them (2026-11-29);
- ``Matmul.run``: a ``gemmlab.Matmul`` bound once to the arrays, run again;
- ``torch-glue``: the distributed ladder's local GEMM on torch tensors
  (api/distributed.GemmlabGemm), where torch is installed.

Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/matmul_overhead.py OUT.json [--sizes 1024,4096,8192]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import numpy as np

from gemmlab.api.matmul import Matmul, dispatch, matmul
from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.measure import gemm
from gemmlab.measure.run import _holder

WAIT_NS = 50_000_000  # the runner's busy wait (measure/run.py), this long, before the kernel_us batches


def measure(cp, n: int, calls: int, rounds: int, way: str) -> dict:
    x = cp.random.default_rng(0).standard_normal((n, n), dtype=cp.float32)
    a = (x.view(cp.uint32) >> 16).astype(cp.uint16)  # bfloat16 bits of normal values
    bt = a.copy()
    if way == "Matmul.run":
        call = Matmul(a, bt.T).run
    elif way == "torch-glue":
        import torch

        from gemmlab.api.distributed import GemmlabGemm

        local = GemmlabGemm()
        ta = torch.from_dlpack(a).view(torch.bfloat16)
        tbt = torch.from_dlpack(bt).view(torch.bfloat16)

        def call() -> None:
            local(ta, tbt)
    else:

        def call() -> None:
            if way == "matmul-replan":
                gemm._PLANS.clear()
            matmul(a, bt.T)

    wait = _holder(cp)
    start, stop = cp.cuda.Event(), cp.cuda.Event()

    def batch(behind_wait: bool) -> tuple[float, float]:
        """(host us per call, GPU us per call) for one batch of calls."""
        if behind_wait:
            wait((1,), (1,), (np.uint64(WAIT_NS),))
        start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        host = (time.perf_counter() - t0) / calls * 1e6
        stop.record()
        stop.synchronize()
        return host, cp.cuda.get_elapsed_time(start, stop) * 1e3 / calls

    batch(False)  # compile, load, plan, and CuPy's pool
    hosts, kernels, queued = [], [], []
    for _ in range(rounds):
        host, gpu_us = batch(True)
        if host * calls >= WAIT_NS / 1e3:
            raise SystemExit(f"the host took {host * calls:.0f} us for {calls} calls: raise WAIT_NS")
        hosts.append(host)
        kernels.append(gpu_us)
        queued.append(batch(False)[1])
    _choice, spec = dispatch(Shape(n, n, n), "bfloat16")
    return {
        "size": n,
        "way": way,
        "kernel": spec.id,
        "config": spec.config,
        "calls": calls,
        "rounds": rounds,
        "host_us": statistics.median(hosts),
        "kernel_us": statistics.median(kernels),
        "queued_us": statistics.median(queued),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sizes", default="1024,4096,8192")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cp = gpu.cupy()
    info = gemm.device_info(0)
    rows = []
    ways = ["matmul", "matmul-replan", "Matmul.run"]
    if importlib.util.find_spec("torch") is not None:
        ways.append("torch-glue")
    for n in (int(s) for s in args.sizes.split(",")):
        for way in ways:
            rows.append(measure(cp, n, args.calls, args.rounds, way))
            r = rows[-1]
            print(f"{n:6d} {way:16s} host {r['host_us']:8.1f} us  queued {r['queued_us']:8.1f} us  "
                  f"kernel {r['kernel_us']:8.1f} us  ({r['kernel']})", flush=True)  # fmt: skip
    args.out.write_text(json.dumps({"device": info.name, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
