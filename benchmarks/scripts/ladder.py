"""Issue 2's benchmark: every matmul kernel of the catalogue at its best block
edge, at N = 1024 and 4096 (the single-block kernel at its document sizes),
each with the cuBLAS ratio. Each record is exactly what `gemmlab run --json`
prints for that point. Usage (on a GPU machine):

    PYTHONPATH=src python3 benchmarks/scripts/ladder.py OUT.json
"""

from __future__ import annotations

import json
import sys

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.run import run

SEARCH_SIZE = 1024
SIZES = (1024, 4096)
SINGLE_BLOCK_SIZES = (176, 352, 528)


def best_edge(kernel_id: str, size: int) -> int | None:
    spec = catalogue.get(kernel_id)
    if not spec.takes_block_edge:
        return None
    best, best_ms = None, float("inf")
    for edge in spec.block_edges:
        try:
            r = run(kernel_id, Shape.square(size), edge, reps=5, baseline=False)
        except GemmlabError:
            continue
        if r.timing.median_ms < best_ms:
            best, best_ms = edge, r.timing.median_ms
    return best


def main(out_path: str) -> None:
    records = []
    for spec in catalogue.CATALOGUE:
        if spec.problem.name != "matmul":
            continue
        sizes = SINGLE_BLOCK_SIZES if spec.id == "single_block" else SIZES
        edge = best_edge(spec.id, 176 if spec.id == "single_block" else SEARCH_SIZE)
        for size in sizes:
            try:
                r = run(spec.id, Shape.square(size), edge, reps=20, max_seconds=20)
            except GemmlabError as exc:
                print(f"{spec.id} N={size}: {exc}", file=sys.stderr)
                continue
            records.append(r.to_dict())
            ratio = f"{r.ratio_to_baseline:7.1%}" if r.ratio_to_baseline else "    n/a"
            print(f"{spec.id:22s} N={size:5d} b={r.block_edge:3d} {r.timing.median_ms:10.4f} ms "
                  f"{r.gflops:10.1f} GFLOPS  cuBLAS {ratio}  err {r.error:.1e}", flush=True)  # fmt: skip
    with open(out_path, "w") as fh:
        json.dump(records, fh, indent=1, default=list)


if __name__ == "__main__":
    main(sys.argv[1])
