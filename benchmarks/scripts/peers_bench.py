"""The programming-models comparison: the CUDA C++ ladders' rungs, the Triton
peer rungs and cuBLAS on the same problems, verified and timed by one runner.

For each element type (float32: the FP32 ladder's C = alpha*A.B + beta*C;
bfloat16: the tensor ladder's C = A.B^T; e4m3 on request: the lowp ladder's
scaled FP8 GEMM) and each size N in 1024, 2048, 4096,
8192 (square), every rung of that problem that runs on this GPU is run
(median of >= 20 repetitions beside cuBLAS); then each rung's compile is timed
once with the caches off (NVRTC for CUDA C++, Triton's compiler for Triton,
cute.compile for the CuTe DSL)
and its lines of code counted. Usage, on a GPU machine with the triton and cute extras:

    PYTHONPATH=src python3 benchmarks/scripts/peers_bench.py OUT.json [--sizes 4096] [--dtypes bfloat16]

OUT.json holds {"results": [RunResult.to_dict(), ...], "failures": [...],
"compile_s": {kernel: s}, "lines": {kernel: n}, "device": {...}}; OUT.txt the
table (report/models.py), OUT.png/svg the plot.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.peers.spec import PEERS
from gemmlab.kernels.spec import KernelSpec
from gemmlab.measure.compile_time import compile_seconds, source_text
from gemmlab.measure.run import run
from gemmlab.report.models import code_lines, models_plot, models_rows, models_text

PROBLEMS = {"float32": "sgemm", "bfloat16": "tensor", "e4m3": "lowp"}


def rungs(dtype: str, arch: str) -> list[KernelSpec]:
    """Every CUDA C++ and peer rung of ``dtype``'s problem that compiles for this GPU."""
    found = []
    for spec in (*catalogue.CATALOGUE, *PEERS):
        if spec.problem.name != PROBLEMS[dtype] or dtype not in spec.dtypes:
            continue
        if any("not installed" in need for need in spec.needs):
            print(f"{spec.id}: left out, {'; '.join(spec.needs)}")
            continue
        try:
            spec.compile_arch(arch)
        except GemmlabError:
            continue
        found.append(spec)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sizes", default="1024,2048,4096,8192")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    args = parser.parse_args()
    info = gpu.describe(0)
    results, failures, seconds, lines = [], [], {}, {}
    for dtype in args.dtypes.split(","):
        specs = rungs(dtype, info.arch)
        for spec in specs:
            seconds[spec.id] = compile_seconds(spec, dtype, info.arch)
            lines[spec.id] = code_lines(source_text(spec))
        for n in map(int, args.sizes.split(",")):
            for spec in specs:
                try:
                    result = run(spec.id, Shape.square(n), dtype=dtype, reps=20, max_seconds=5.0)
                except GemmlabError as exc:
                    failures.append({"kernel": spec.id, "dtype": dtype, "n": n, "reason": str(exc)})
                    print(f"{spec.id} {dtype} {n}: {exc}")
                    continue
                results.append(result.to_dict())
                print(f"{spec.id:28} {dtype:9} {n:5}  {result.gflops / 1e3:7.1f} TFLOPS", flush=True)
    peer_models = {spec.id: {"triton": "Triton", "cute": "CuTe DSL"}[spec.model] for spec in PEERS}
    table = models_rows(results, peer_models, lines, seconds)
    text = models_text(table)
    print("\n" + text)
    stored = {"results": results, "failures": failures, "compile_s": seconds, "lines": lines,
              "device": dataclasses.asdict(info)}  # fmt: skip
    args.out.write_text(json.dumps(stored, indent=1, default=str))
    args.out.with_suffix(".txt").write_text(text + "\n")
    models_plot(table, args.out.parent, args.out.stem)


if __name__ == "__main__":
    main()
