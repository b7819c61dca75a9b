"""Every catalogue kernel under Nsight Compute, one verified launch each: the
profiler's view of the whole catalogue (GIPS, FLOPs executed, CGMA, occupancy
and its limiter, DRAM traffic, bank conflicts) in one file. Usage, on a GPU
machine with ncu:

    PYTHONPATH=src python3 benchmarks/scripts/profile_all.py OUT.json [KERNEL...]

Kernel ids after OUT.json profile only those (a second try at what the first
run did not reach). The points:

- compute kernels (the documents' matmuls and the sgemm_ ladder) at
  N = 1024: a kernel that takes a block edge gets its best edge from the H200
  doc-ladder benchmark (BEST_EDGES), or where that has none that fits
  N = 1024 the largest documented edge that does; the sgemm_ rungs take none
  and run their default configuration;
- memory kernels (copies, transposes, vector additions) at 4096 x 4096
  float32, tile 32 where they take one.

OUT.json is a list of {"kernel", "shape", "block_edge", **ProfileResult.to_dict()},
rewritten after each kernel, so a run cut short keeps what it profiled. A
kernel whose profile fails is reported and skipped; after PROFILER_GIVE_UP
profiler errors in a row (no ncu, counters not permitted) the rest are
skipped too. Each ncu run takes a few seconds (a child process, the NVRTC
compile, one replay per group of counters); BUDGET_S stops the run before six
minutes whatever happens, listing what it did not reach.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from gemmlab.core.errors import GemmlabError, ProfilerError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.measure.ncu.command import find_ncu, profile_point
from gemmlab.measure.ncu.metrics import ProfileResult
from gemmlab.studies.reproduce import PROFILER_GIVE_UP

ROOT = Path(__file__).resolve().parents[2]
BEST_EDGES = ROOT / "benchmarks" / "results" / "2026-11-21_h200_doc-ladder.json"
COMPUTE_SHAPE = Shape.square(1024)
MEMORY_SHAPE = Shape(4096, 4096, 1)  # rows x columns; the vector additions take its m * n elements
MEMORY_TILE = 32
BUDGET_S = 330.0
MAX_POINT_S = 120.0  # ncu's limit for one kernel (the slowest, single_block at 1024, takes about 0.2 s a launch)


def best_edges(path: Path) -> dict[str, int]:
    """kernel id -> the block edge the ladder benchmark found fastest (it kept one per kernel)."""
    if not path.is_file():
        return {}
    return {r["kernel"]: r["block_edge"] for r in json.loads(path.read_text()) if r.get("block_edge")}


def plan_point(spec: KernelSpec, best: dict[str, int]) -> tuple[Shape, int, str]:
    """(shape, block edge, where the edge comes from) of one kernel's profile."""
    memory = spec.problem.metric == "gbs"
    shape = MEMORY_SHAPE if memory else COMPUTE_SHAPE
    if not spec.takes_block_edge:
        return shape, 0, "default configuration" if spec.template_extra else "no block edge"
    preferred = MEMORY_TILE if memory else best.get(spec.id)
    candidates = [e for e in (preferred, *sorted(spec.block_edges, reverse=True)) if e is not None]
    edge = next((e for e in candidates if not spec.violations(shape, e, spec.dtypes[0])), candidates[0])
    if memory:
        why = "tile 32" if edge == MEMORY_TILE else "largest documented tile that fits"
    elif edge == preferred:
        why = f"best edge of {BEST_EDGES.name}"
    else:
        why = f"largest documented edge that fits N = {shape.n}" + (
            f" ({preferred} does not)" if preferred is not None else ""
        )
    return shape, edge, why


def summary_line(r: ProfileResult, memory: bool) -> str:
    rate = f"{r.dram_gbs:9.0f} GB/s " if memory else f"{r.gflops:9.1f} GFLOPS"
    cgma = "" if memory or r.cgma_measured is None else f"  CGMA {r.cgma_measured:7.1f}"
    occupancy = f"{r.achieved_occupancy or 0:5.1f}/{r.theoretical_occupancy or 0:5.1f}%"
    return (
        f"{r.time_ms:9.4f} ms {rate}  GIPS {r.gips or 0:8.1f}{cgma}  occupancy {occupancy} "
        f"(limited by {', '.join(r.limiting_factors) or 'n/a'})  DRAM {r.dram_bytes / 1e6:8.1f} MB"
    )


def write(out_path: Path, records: list[dict]) -> None:
    partial = out_path.with_name(out_path.name + ".part")
    partial.write_text(json.dumps(records, indent=1, default=list))
    os.replace(partial, out_path)


def main(out_path: Path, only: list[str]) -> int:
    specs = [catalogue.get(kernel_id) for kernel_id in only] if only else list(catalogue.CATALOGUE)
    start = time.monotonic()
    print(f"ncu: {find_ncu()}", flush=True)
    best = best_edges(BEST_EDGES)
    records: list[dict] = []
    failed: list[str] = []
    not_reached: list[str] = []
    profiler_errors_in_a_row = 0
    for spec in specs:
        left = BUDGET_S - (time.monotonic() - start)
        if left < 10 or profiler_errors_in_a_row >= PROFILER_GIVE_UP:
            not_reached.append(spec.id)
            continue
        shape, edge, why = plan_point(spec, best)
        label = f"{spec.id:26s} {shape!s:>11s} b={edge:<2d}"
        began = time.monotonic()
        try:
            r = profile_point(spec.id, shape, edge, timeout=min(MAX_POINT_S, left))
        except GemmlabError as exc:
            profiler_errors_in_a_row = profiler_errors_in_a_row + 1 if isinstance(exc, ProfilerError) else 0
            failed.append(spec.id)
            print(f"{label} FAILED ({why}): {exc}", flush=True)
            continue
        profiler_errors_in_a_row = 0
        records.append({"kernel": spec.id, "shape": str(shape), "block_edge": edge, **r.to_dict()})
        write(out_path, records)
        took = time.monotonic() - began
        print(f"{label} {summary_line(r, spec.problem.metric == 'gbs')}  [{why}; {took:.1f} s]", flush=True)
    if not records:
        write(out_path, records)
    print(f"{len(records)} profiled, {len(failed)} failed{': ' + ', '.join(failed) if failed else ''}; "
          f"{time.monotonic() - start:.0f} s; {out_path}", flush=True)  # fmt: skip
    if not_reached:
        print(f"not reached (time budget or a broken profiler): {', '.join(not_reached)}", flush=True)
    return 0 if records else 1


if __name__ == "__main__":
    try:
        sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
    except GemmlabError as exc:  # no ncu, an unknown kernel id: one line, nothing profiled
        sys.exit(f"nothing profiled: {exc}")
