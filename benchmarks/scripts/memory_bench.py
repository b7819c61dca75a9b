"""Issue 4's benchmark: every memory-bound kernel at the lecture's 4000 x 4000
and at 16384 x 16384 (1 GiB of float32, far beyond the L2), L2 flushed between
repetitions, against the measured copy ceiling and the datasheet bandwidth.
Records are `RunResult.to_dict()` plus the two fractions. Usage (GPU machine):

    PYTHONPATH=src python3 benchmarks/scripts/memory_bench.py OUT.json
"""

from __future__ import annotations

import json
import sys

from gemmlab.core.shapes import Shape
from gemmlab.kernels.memory.spec import MEMORY_KERNELS
from gemmlab.measure.bandwidth import bandwidth_table, datasheet_bandwidth, measure_copy_ceiling
from gemmlab.measure.run import run

SHAPES = (Shape(4000, 4000, 1), Shape(16384, 16384, 1))


def main(out_path: str) -> None:
    ceiling = measure_copy_ceiling()
    datasheet = datasheet_bandwidth()
    print(f"measured copy ceiling {ceiling:.0f} GB/s, datasheet {datasheet:.0f} GB/s", flush=True)
    records = []
    for shape in SHAPES:
        for spec in MEMORY_KERNELS:
            for edge in spec.block_edges or (None,):
                r = run(spec.id, shape, edge, "float32", reps=20, flush_l2=True)
                row = bandwidth_table([r], ceiling, datasheet)[0]
                records.append({**r.to_dict(), **row, "copy_ceiling_gbs": ceiling, "datasheet_gbs": datasheet})
                print(f"{spec.id:24s} {shape.m}x{shape.n} tile={r.block_edge:2d} {r.gbytes_per_s:8.0f} GB/s "
                      f"{row['fraction_of_ceiling']:6.1%} of copy  {row.get('fraction_of_datasheet') or 0:6.1%} "
                      f"of datasheet", flush=True)  # fmt: skip
    with open(out_path, "w") as fh:
        json.dump(records, fh, indent=1, default=list)


if __name__ == "__main__":
    main(sys.argv[1])
