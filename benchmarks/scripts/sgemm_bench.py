"""The FP32 ladder against cuBLAS, in one run (a few minutes on an H100/H200).

Every sgemm_ rung at its default configuration, at N = 2048, 4096, 8192, 4095,
4097 and the rectangular 8192 x 8192 x 1024 and 4096 x 1024 x 8192 (M x N x K),
each verified and timed by the runner beside cuBLAS in the same run; then the
SASS of each rung's cubin (cuobjdump --dump-sass): its FFMA count and a check
that no tensor-core instruction (HMMA, HGMMA, ...) is in it. Usage, on a GPU
machine:

    PYTHONPATH=src python3 benchmarks/scripts/sgemm_bench.py OUT.json [--quick]

--quick: N = 4096 only. OUT.json holds {"results": [RunResult.to_dict(), ...],
"sass": {kernel: {...}}}; a compact table goes to stdout.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

from gemmlab.backends.nvrtc import compile_kernel
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.sgemm.spec import SGEMM_KERNELS
from gemmlab.measure.run import run
from gemmlab.measure.sass import find_tool, sass_opcodes, tensor_core_ops, total

SHAPES = [Shape.square(n) for n in (2048, 4096, 8192, 4095, 4097)] + [Shape(8192, 8192, 1024), Shape(4096, 1024, 8192)]
QUICK_SHAPES = [Shape.square(4096)]


def sass_summary(ops: collections.Counter) -> dict:
    return {
        **{name.lower(): total(ops, name) for name in ("FFMA", "LDS", "STS", "LDG", "LDGSTS", "STG", "BAR")},
        "tensor_core": tensor_core_ops(ops),
        "opcodes": dict(ops.most_common()),
    }


def dump_sass(arch: str) -> dict:
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        print("cuobjdump not found (PATH, /usr/local/cuda/bin, nvidia wheels): no SASS counts", file=sys.stderr)
        return {}
    found = {}
    print(f"\nSASS ({arch}), static counts per kernel")
    print(f"{'kernel':22s} {'regs':>4s} {'smem':>6s} {'FFMA':>5s} {'LDS':>4s} {'STS':>4s} {'LDG':>4s} "
          f"{'LDGSTS':>6s} {'BAR':>3s}  tensor-core")  # fmt: skip
    for spec in SGEMM_KERNELS:
        compiled = compile_kernel(spec, 0, "float32", arch)
        summary = sass_summary(sass_opcodes(compiled.cubin))
        summary.update(config=spec.config, registers=compiled.resources.registers,
                       smem_bytes=compiled.resources.smem_bytes)  # fmt: skip
        found[spec.id] = summary
        s = summary
        print(f"{spec.id:22s} {s['registers']:4d} {s['smem_bytes']:6d} {s['ffma']:5d} {s['lds']:4d} {s['sts']:4d} "
              f"{s['ldg']:4d} {s['ldgsts']:6d} {s['bar']:3d}  {s['tensor_core'] or 'none'}")  # fmt: skip
    if any(s["tensor_core"] for s in found.values()):
        print("WARNING: tensor-core instructions in an FP32 FFMA kernel", file=sys.stderr)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="N = 4096 only")
    args = parser.parse_args()
    shapes = QUICK_SHAPES if args.quick else SHAPES
    info = gpu.describe(0)
    print(f"{info.name} ({info.arch}), {info.sm_count} SMs, FP32 peak {info.peak_fp32_gflops or 0:.0f} GFLOPS "
          f"at {info.sm_clock_mhz} MHz")  # fmt: skip
    print(f"{'kernel':22s} {'shape':>16s} {'ms':>9s} {'GFLOPS':>8s} {'cuBLAS':>8s} {'ratio':>6s} {'err':>8s}")
    records = []
    start = time.monotonic()
    for spec in SGEMM_KERNELS:
        for shape in shapes:
            try:
                r = run(spec.id, shape, None, reps=20, max_seconds=5)
            except GemmlabError as exc:
                print(f"{spec.id:22s} {shape!s:>16s} {exc}", file=sys.stderr, flush=True)
                continue
            records.append(r.to_dict())
            ratio = f"{r.ratio_to_baseline:6.1%}" if r.ratio_to_baseline else "   n/a"
            print(f"{spec.id:22s} {f'{shape.m}x{shape.n}x{shape.k}':>16s} {r.timing.median_ms:9.3f} {r.gflops:8.0f} "
                  f"{r.baseline_gflops or 0:8.0f} {ratio} {r.error:8.1e}", flush=True)  # fmt: skip
    print(f"({time.monotonic() - start:.0f} s)")
    sass = dump_sass(info.arch)
    with open(args.out, "w") as fh:
        json.dump({"results": records, "sass": sass}, fh, indent=1, default=list)


if __name__ == "__main__":
    main()
