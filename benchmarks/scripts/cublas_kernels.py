"""Which kernels cuBLAS runs for the shapes our rungs lose: each baseline
call of the issue-21 shapes, launched a few times so that Nsight Compute can
catch one, and named on stderr so that ncu's rows can be matched to shapes.
cuBLAS's kernel names carry its tile, stages and cluster (nvjet_* or
sm90_xmma_*), and ncu's launch statistics its grid: what it chose to do where
we are slower. Usage, on a GPU machine:

    ncu --clock-control none --section LaunchStats --section SpeedOfLight --csv --page details \\
        python3 benchmarks/scripts/cublas_kernels.py > cublas.csv 2> shapes.txt
    python3 benchmarks/scripts/cublas_kernels.py --table cublas.csv shapes.txt

The second prints a line per GEMM kernel (fills skipped): the shape whose
calls it belongs to, its name, grid, block, cluster, registers, dynamic
shared memory and duration under the profiler (each launch alone, caches
flushed: longer than in a timed run).
Shapes are M x N x K; types float32 (cublasGemmEx, FP32 compute, the FP32
ladder's alpha and beta), bfloat16 and bfloat16-out (bf16 inputs, float32 or
bfloat16 C). `--shapes bfloat16:1536x1536x1536,float32:3000x3000x3000` in
place of no argument calls those type:shape pairs instead of SHAPES.
"""

from __future__ import annotations

import csv
import io
import sys

SHAPES = {
    "float32": ["512x512x512", "1024x1024x1024", "2048x2048x2048", "128x4096x4096", "1024x1024x16384",
                "8192x8192x256", "16384x256x4096"],
    "bfloat16": ["1024x1024x1024", "2048x2048x2048", "128x4096x4096", "1024x1024x16384", "8192x8192x256",
                 "4096x16x4096", "16x4096x4096"],
    "bfloat16-out": ["1024x1024x1024", "1024x1024x16384", "4096x16x4096"],
}  # fmt: skip


def call(dtype: str, m: int, n: int, k: int):
    import cupy as cp

    from gemmlab.problems import matmul, tensor

    if dtype == "float32":
        a = cp.ones((m, k), cp.float32)
        b = cp.ones((k, n), cp.float32)
        c = cp.zeros((m, n), cp.float32)
        return matmul.cublas_gemm(cp, a, b, c, "float32", matmul.ALPHA["float"], matmul.BETA["float"])
    a = cp.zeros((m, k), cp.uint16)
    b = cp.zeros((n, k), cp.uint16)
    c = cp.zeros((m, n), cp.uint16 if dtype == "bfloat16-out" else cp.float32)
    return tensor.cublas_gemm(cp, a, b, c, dtype)


def table(csv_path: str, shapes_path: str) -> int:
    """ncu's rows, a kernel per line, labelled with the shapes in call order."""
    rows = list(csv.reader(io.StringIO("\n".join(x for x in open(csv_path).read().splitlines() if x.startswith('"')))))
    head = rows[0]
    col = {name: head.index(name) for name in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
    kernels: dict[str, dict[str, str]] = {}
    for row in rows[1:]:
        entry = kernels.setdefault(row[col["ID"]], {"name": row[col["Kernel Name"]]})
        entry[row[col["Metric Name"]]] = row[col["Metric Value"]]
    shapes = [line.split()[1:3] for line in open(shapes_path) if line.startswith("shape ")]
    # Each shape's three calls launch one sequence of kernels three times over:
    # the shortest period that repeats three times from here is one call.
    launches = [k for _, k in sorted(kernels.items(), key=lambda kv: int(kv[0])) if "fill" not in k["name"]]
    key = [(k["name"], k.get("Grid Size")) for k in launches]
    calls, i = [], 0
    while i < len(launches):
        period = next((p for p in (1, 2, 3) if key[i : i + p] * 3 == key[i : i + 3 * p]), 1)
        calls.append(launches[i : i + period])
        i += 3 * period
    print("type shape | kernel | grid | block | cluster | registers | dynamic smem | us under ncu")
    if len(calls) != len(shapes):
        print(f"note: {len(calls)} calls found for {len(shapes)} shapes; the labels may be off", file=sys.stderr)
    for (dtype, shape), call_launches in zip(shapes, calls, strict=False):
        for k in call_launches:
            us = float(k.get("Duration", "0").replace(",", "")) / 1e3
            print(f"{dtype} {shape.rstrip(':')} | {k['name'][:100]} | {k.get('Grid Size')} | {k.get('Block Size')} | "
                  f"{k.get('Cluster Size')} | {k.get('Registers Per Thread')} | "
                  f"{k.get('Dynamic Shared Memory Per Block')} | {us:.1f}")  # fmt: skip
    return 0


def main() -> int:
    if sys.argv[1:2] == ["--table"]:
        return table(sys.argv[2], sys.argv[3])
    import cupy as cp

    shapes_by_type = SHAPES
    if sys.argv[1:2] == ["--shapes"]:
        shapes_by_type = {}
        for pair in sys.argv[2].split(","):
            dtype, _, shape = pair.partition(":")
            shapes_by_type.setdefault(dtype, []).append(shape)
    for dtype, shapes in shapes_by_type.items():
        for shape in shapes:
            m, n, k = (int(x) for x in shape.split("x"))
            gemm = call(dtype, m, n, k)
            for _ in range(3):
                gemm()
            cp.cuda.Device().synchronize()
            print(f"shape {dtype} {shape}: 3 calls", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
