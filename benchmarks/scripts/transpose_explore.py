"""Exploration for the memory lab's transpose target (>= 90% of the copy
ceiling at 16384 x 16384 float32): the padded tiled transpose with other
tile edges and thread rows, each verified and timed through the normal runner.
Usage (GPU): PYTHONPATH=src python3 benchmarks/scripts/transpose_explore.py OUT.json
"""

from __future__ import annotations

import dataclasses
import json
import sys

from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.bandwidth import measure_copy_ceiling
from gemmlab.measure.run import run

SHAPE = Shape(16384, 16384, 1)
# (tile edge, thread rows): threads per block = tile x rows, each moves tile / rows elements.
VARIANTS = [(32, 8), (32, 4), (32, 16), (32, 2), (64, 8), (64, 16), (16, 4), (16, 2)]


def main(out_path: str) -> None:
    ceiling = measure_copy_ceiling()
    print(f"copy ceiling {ceiling:.0f} GB/s", flush=True)
    records = []
    for kid in ("transpose_tiled_padded", "copy_tiled"):
        base = catalogue.get(kid)
        for tile, rows in VARIANTS:
            spec = dataclasses.replace(
                base, thread_rows=lambda b, r=rows: r, block=lambda s, b, r=rows: (b, r, 1), max_edge=64
            )
            catalogue._BY_ID[kid] = spec  # an exploration, not a catalogue change
            try:
                r = run(kid, SHAPE, tile, "float32", reps=20, flush_l2=True)
            except Exception as exc:
                print(f"{kid} tile {tile} rows {rows}: {exc}", flush=True)
                continue
            finally:
                catalogue._BY_ID[kid] = base
            frac = r.gbytes_per_s / ceiling
            records.append({"kernel": kid, "tile": tile, "rows": rows, "gbs": r.gbytes_per_s, "fraction": frac,
                            "registers": r.resources.registers})  # fmt: skip
            print(f"{kid:24s} tile {tile:2d} rows {rows:2d} {r.gbytes_per_s:7.0f} GB/s {frac:6.1%}", flush=True)
    with open(out_path, "w") as fh:
        json.dump({"copy_ceiling_gbs": ceiling, "shape": [SHAPE.m, SHAPE.n], "results": records}, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
