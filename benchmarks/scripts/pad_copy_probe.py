"""What sgemm_padded_b's copy of B costs, and the sizes it matters at.

Times sgemm_padded_b (no cuBLAS, median of 20 launches, 3 rounds, the median
of the rounds printed) at M = 32 with N = 4096, 4095 and 4097 (K = 4096):
there the whole product is one row of 16 tiles, the same at all three N, and
every tile waits for the copy, so the difference between N = 4095 or 4097
and N = 4096 is the copy of B (one read, one padded write); then at
4096^3, 4096 x 4095 x 4096, 4095^3 and 4097^3, each with its speed as a share
of the 4096^3 speed. Run before and after a change to the copy to see
whether it pays. Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/pad_copy_probe.py
"""

from __future__ import annotations

import statistics

from gemmlab.core.shapes import Shape
from gemmlab.measure.run import run

SHAPES = [
    Shape(32, 4096, 4096),
    Shape(32, 4095, 4096),
    Shape(32, 4097, 4096),
    Shape.square(4096),
    Shape(4096, 4095, 4096),
    Shape.square(4095),
    Shape.square(4097),
]


def main() -> None:
    times = {s: [] for s in SHAPES}
    for _ in range(3):
        for s in SHAPES:
            times[s].append(run("sgemm_padded_b", s, None, reps=20, baseline=False).timing.median_ms)
    base = statistics.median(times[Shape.square(4096)])
    for s in SHAPES:
        ms = statistics.median(times[s])
        work = s.m * s.n * s.k / 4096**3
        rounds = [round(x * 1e3, 1) for x in times[s]]
        share = base * work / ms
        print(f"{s.m}x{s.n}x{s.k} median {ms * 1e3:9.1f} us  rounds {rounds}  of 4096 {share:6.1%}", flush=True)


if __name__ == "__main__":
    main()
