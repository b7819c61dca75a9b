"""Where an odd size's extra time goes: one dimension odd at a time.

For each kernel named (default sgemm_padded_b), times N = 4096, then the
shapes with one of M, N, K made 4097 (and 4095, 4097 whole), in rounds, so
that each odd shape sits beside a 4096 run of the same round. For each point:
the median time, TFLOP/s, its speed as a share of the round's 4096 speed, and
its extra time: the measured time less the 4096 time scaled by the work
(M x N x K / 4096^3). Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/odd_size_split.py OUT.json [KERNEL ...] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics

from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.measure.run import run

ALIGNED = Shape.square(4096)
ODD = [
    Shape(4097, 4096, 4096),  # M odd: a row strip below the tiles
    Shape(4096, 4097, 4096),  # N odd: B padded (rung 17), a column strip, C stored 4 bytes at a time
    Shape(4096, 4096, 4097),  # K odd: A's rows misaligned, one more k step
    Shape.square(4095),
    Shape.square(4097),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("kernels", nargs="*", default=["sgemm_padded_b"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    info = gpu.describe(0)
    print(f"{info.name} ({info.arch}), {args.rounds} rounds, median of 20 launches per point, no cuBLAS")
    print(f"{'kernel':18s} {'round':>5s} {'shape':>16s} {'ms':>8s} {'TFLOP/s':>8s} {'of 4096':>8s} {'extra us':>9s}")
    records = []
    for kernel in args.kernels:
        for rnd in range(args.rounds):
            base = run(kernel, ALIGNED, None, reps=20, baseline=False)
            base_ms = base.timing.median_ms
            for shape in [ALIGNED, *ODD]:
                r = base if shape == ALIGNED else run(kernel, shape, None, reps=20, baseline=False)
                work = shape.m * shape.n * shape.k / 4096**3
                extra_us = (r.timing.median_ms - base_ms * work) * 1e3
                share = r.gflops / base.gflops
                records.append({"kernel": kernel, "round": rnd, "shape": [shape.m, shape.n, shape.k],
                                "median_ms": r.timing.median_ms, "gflops": r.gflops, "of_4096": share,
                                "extra_us": extra_us, "error": r.error})  # fmt: skip
                print(f"{kernel:18s} {rnd:5d} {f'{shape.m}x{shape.n}x{shape.k}':>16s} {r.timing.median_ms:8.3f} "
                      f"{r.gflops / 1e3:8.2f} {share:8.1%} {extra_us:9.1f}", flush=True)  # fmt: skip
        print(f"\n{kernel}: median over rounds")
        for shape in ODD:
            rows = [x for x in records if x["kernel"] == kernel and x["shape"] == [shape.m, shape.n, shape.k]]
            share = statistics.median(x["of_4096"] for x in rows)
            extra = statistics.median(x["extra_us"] for x in rows)
            print(f"  {f'{shape.m}x{shape.n}x{shape.k}':>16s} of 4096 {share:6.1%}  extra {extra:7.1f} us")
    with open(args.out, "w") as fh:
        json.dump({"device": info.name, "rounds": args.rounds, "results": records}, fh, indent=1)


if __name__ == "__main__":
    main()
