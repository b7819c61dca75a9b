"""Does a pick's speed depend on what ran before it in the process? Runs the
dispatcher's picks from a tuned database (dispatch_bench.py's OUT.sqlite) for
one shape alone a few times, then the given shapes in order for each type, as
the suite runs them, then the shape again after the one before it. Each line
is a full verified run beside cuBLAS (gemmlab's runner: CUDA graphs below
50 us). Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/run_order.py DB.sqlite [--shape 16x4096x4096]
        [--dtype bfloat16-out] [--order 1x4096x4096,8x4096x4096,16x4096x4096,64x4096x4096,128x4096x4096]
        [--dtypes bfloat16,bfloat16-out] [--alone 3]
"""

from __future__ import annotations

import argparse

from config_ab import parse_shape

from gemmlab.api.matmul import dispatch
from gemmlab.core.shapes import Shape
from gemmlab.measure.run import run


def one(db: str, shape: Shape, dtype: str, tag: str) -> None:
    choice, spec = dispatch(shape, dtype, db)
    r = run(choice.kernel, shape, None, dtype, spec=spec, reps=20)
    print(f"{tag:9s} {dtype:13s} {shape!s:>14s} {choice.kernel} {dict(spec.config)} "
          f"ours {r.timing.median_ms * 1e3:.2f} us, cuBLAS {r.baseline_timing.median_ms * 1e3:.2f} us, "
          f"{100 * r.ratio_to_baseline:.1f}%", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("db")
    parser.add_argument("--shape", default="16x4096x4096")
    parser.add_argument("--dtype", default="bfloat16-out")
    parser.add_argument("--order", default="1x4096x4096,8x4096x4096,16x4096x4096,64x4096x4096,128x4096x4096")
    parser.add_argument("--dtypes", default="bfloat16,bfloat16-out")
    parser.add_argument("--alone", type=int, default=3)
    args = parser.parse_args()
    shape, order = parse_shape(args.shape), [parse_shape(s) for s in args.order.split(",")]
    for _ in range(args.alone):
        one(args.db, shape, args.dtype, "alone")
    for dtype in args.dtypes.split(","):
        for s in order:
            one(args.db, s, dtype, "in order")
    before = order[order.index(shape) - 1] if shape in order and order.index(shape) > 0 else None
    for _ in range(2):
        if before is not None:
            one(args.db, before, args.dtype, "before")
        one(args.db, shape, args.dtype, "after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
