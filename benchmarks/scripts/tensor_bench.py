"""The tensor-core ladder against cuBLAS in the same types, in one run.

Every tc_ rung that runs on this GPU, for each of its element types, at
N = 2048, 4096, 8192 and the rectangular 8192 x 8192 x 2048 and
16384 x 4096 x 4096 (M x N x K), each verified and timed by the runner beside
cublasGemmEx in the same run (median of >= 20 repetitions each); then the
SASS of each rung's cubin: its tensor-core instructions and a check of the
instructions it claims (KernelSpec.sass). First, in the same process, the
GPU's peak rates are measured for each input type (gemmlab.measure.peak: mma.sync
and, on Hopper, wgmma; bfloat16-out multiplies bfloat16). Each result carries
the nominal dense rate of its input type at the SM clock read right after it
(peak_gflops_at_clock) and the measured peak of that type, the fastest
family's (measured_peak_gflops, measured_peak_instruction).
Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/tensor_bench.py OUT.json [--quick] [--kernels ID ...]

--quick: N = 4096 only. OUT.json holds {"results": [RunResult.to_dict(), ...],
"peaks": {"family/dtype": Peak.to_dict(), ...}, "sass": {kernel: {dtype:
{...}}}, "device": {...}}; a table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.spec import KernelSpec
from gemmlab.kernels.tensor.spec import TENSOR_KERNELS
from gemmlab.measure import peak
from gemmlab.measure.run import run
from gemmlab.measure.sass import missing_claims, sass_opcodes, tensor_core_ops, total
from gemmlab.problems.tensor import input_dtype

SHAPES = [Shape.square(n) for n in (2048, 4096, 8192)] + [Shape(8192, 8192, 2048), Shape(16384, 4096, 4096)]
QUICK_SHAPES = [Shape.square(4096)]


def sass_report(specs: list[KernelSpec], arch: str) -> dict:
    found: dict = {}
    print("\nSASS, static counts per kernel and type")
    for spec in specs:
        for dtype in spec.dtypes:
            compiled = compile_kernel(spec, 0, dtype, spec.compile_arch(arch))
            ops = sass_opcodes(compiled.cubin)
            entry = {
                "arch": compiled.arch,
                "registers": compiled.resources.registers,
                "tensor_core": tensor_core_ops(ops),
                "claimed": list(spec.sass),
                "missing": missing_claims(spec.sass, ops),
                "ffma": total(ops, "FFMA"),
                "utmaldg": total(ops, "UTMALDG"),
                "ldsm": total(ops, "LDSM"),
            }
            found.setdefault(spec.id, {})[dtype] = entry
            print(f"{spec.id:20s} {dtype:12s} {compiled.arch:7s} regs {entry['registers']:3d}  "
                  f"{entry['tensor_core']}  missing: {entry['missing'] or 'none'}")  # fmt: skip
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="N = 4096 only")
    parser.add_argument("--kernels", nargs="*", help="only these rungs")
    parser.add_argument("--dtypes", nargs="*", help="only these element types")
    args = parser.parse_args()
    shapes = QUICK_SHAPES if args.quick else SHAPES
    info = gpu.describe(0)
    specs = [s for s in TENSOR_KERNELS if not args.kernels or s.id in args.kernels]
    runnable = []
    for spec in specs:
        try:
            spec.compile_arch(info.arch)
            runnable.append(spec)
        except GemmlabError as exc:
            print(f"{spec.id}: {exc}", file=sys.stderr)
    print(f"{info.name} ({info.arch}), {info.sm_count} SMs, boost {info.sm_clock_mhz} MHz")
    dtypes = [d for d in dict.fromkeys(d for s in runnable for d in s.dtypes) if not args.dtypes or d in args.dtypes]
    inputs = list(dict.fromkeys(input_dtype(d) for d in dtypes))
    peaks = peak.measure(inputs) if inputs else []
    for p in peaks:
        nominal = f"{p.ratio_to_nominal:.1%} of nominal" if p.ratio_to_nominal else "nominal n/a"
        print(f"peak {p.family:8s} {p.dtype:9s} {p.instruction:28s} {p.gflops / 1e3:7.1f} TFLOP/s at "
              f"{p.sm_clock_after_mhz or 0:5.0f} MHz ({nominal})", flush=True)  # fmt: skip
    measured = peak.best_by_dtype(peaks)
    print(f"{'kernel':20s} {'dtype':12s} {'shape':>16s} {'ms':>8s} {'TFLOP/s':>8s} {'cuBLAS':>8s} {'ratio':>7s} "
          f"{'%peak':>6s} {'%meas':>6s} {'MHz':>5s} {'err':>8s}")  # fmt: skip
    records = []
    start = time.monotonic()
    for spec in runnable:
        for dtype in spec.dtypes:
            if dtype not in dtypes:
                continue
            best = measured.get(input_dtype(dtype))
            for shape in shapes:
                try:
                    r = run(spec.id, shape, dtype=dtype, reps=20, max_seconds=5)
                except GemmlabError as exc:
                    print(f"{spec.id:20s} {dtype:12s} {shape!s:>16s} {exc}", file=sys.stderr, flush=True)
                    continue
                record = r.to_dict()
                nominal = info.peak_tensor_gflops(input_dtype(dtype), r.sm_clock_after_mhz)
                record["peak_gflops_at_clock"] = nominal
                if best is not None:
                    record["measured_peak_gflops"] = best.gflops
                    record["measured_peak_instruction"] = best.instruction
                records.append(record)
                ratio = f"{r.ratio_to_baseline:7.1%}" if r.ratio_to_baseline else "    n/a"
                share = f"{r.gflops / nominal:6.1%}" if nominal else "   n/a"
                of_measured = f"{r.gflops / best.gflops:6.1%}" if best else "   n/a"
                print(f"{spec.id:20s} {dtype:12s} {f'{shape.m}x{shape.n}x{shape.k}':>16s} {r.timing.median_ms:8.3f} "
                      f"{r.gflops / 1e3:8.1f} {(r.baseline_gflops or 0) / 1e3:8.1f} {ratio} {share} {of_measured} "
                      f"{r.sm_clock_after_mhz or 0:5.0f} {r.error:8.1e}", flush=True)  # fmt: skip
    print(f"({time.monotonic() - start:.0f} s)")
    sass = sass_report(runnable, info.arch)
    with open(args.out, "w") as fh:
        json.dump({"device": info.to_dict(), "peaks": {f"{p.family}/{p.dtype}": p.to_dict() for p in peaks},
                   "results": records, "sass": sass}, fh, indent=1, default=list)  # fmt: skip


if __name__ == "__main__":
    main()
