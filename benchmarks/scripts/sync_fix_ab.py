"""Before and after a synchronisation fix: two versions of a catalogue kernel
timed in alternation, each verified, beside cuBLAS.

The "before" sources are files named _before_<catalogue file> in a folder
given on the command line (copies of the kernels as they were); they are
copied beside the catalogue's sources for the run (their includes resolve
there) and removed afterwards. Each round runs every shape with the new
kernel and the old one, in turn, the order swapped each round: the clocks
and the neighbours drift over both alike. Usage, on a GPU machine, from the repository root:

    PYTHONPATH=src python3 benchmarks/scripts/sync_fix_ab.py BEFORE_DIR OUT.json [--rounds 4]

Issue 23's fixes (docs/synchronisation.md, findings 1 and 2):
sgemm_stream_k (one fence per block instead of one per thread, each side of
the tail tiles' counter) and sgemm_padded_b (the wait for the padded copy of B
bounded, with a trap past it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
from pathlib import Path

from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.run import run

KERNELS_DIR = Path(catalogue.__file__).parent
# Shapes where the changed code runs: stream-K's tail (tiles % SMs != 0 at all
# of these on 132 SMs) and the padded copy (N % 4 != 0), with 4096 as a control
# for the padded B (no copy, no wait there).
CASES = {
    "sgemm_stream_k": [Shape.square(4096), Shape.square(4097), Shape(8192, 8192, 1024)],
    "sgemm_padded_b": [Shape.square(4095), Shape.square(4097), Shape.square(4096)],
}


def before_spec(kernel: str, before_dir: Path):
    spec = catalogue.get(kernel)
    name = Path(spec.source).name
    copy = KERNELS_DIR / Path(spec.source).parent / f"_before_{name}"
    shutil.copyfile(before_dir / f"_before_{name}", copy)
    return dataclasses.replace(spec, id=f"{kernel}@before", source=str(Path(spec.source).parent / copy.name)), copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    info = gpu.describe(0)
    copies = []
    times: dict[tuple[str, str, str], list[float]] = {}
    library: dict[tuple[str, str], list[float]] = {}
    try:
        versions = {}
        for kernel in CASES:
            spec, copy = before_spec(kernel, args.before_dir)
            copies.append(copy)
            versions[kernel] = {"after": catalogue.get(kernel), "before": spec}
        # cuBLAS once per shape, before the rounds (a warm-up for both versions' compiles too).
        for kernel, shapes in CASES.items():
            for shape in shapes:
                for version, spec in versions[kernel].items():
                    result = run(kernel, shape, spec=spec, reps=5, baseline=version == "after")
                    if result.baseline_timing is not None:
                        library[(kernel, str(shape))] = [result.baseline_timing.median_ms]
        # Then the rounds, with nothing else timed between, the order of the two
        # versions swapped every round (on 2026-11-23 a fixed order, after first with
        # cuBLAS beside it, put an unchanged path 1.2% apart).
        for r in range(args.rounds):
            for kernel, shapes in CASES.items():
                order = list(versions[kernel].items())
                for shape in shapes:
                    for version, spec in order if r % 2 == 0 else order[::-1]:
                        result = run(kernel, shape, spec=spec, reps=20, baseline=False)
                        times.setdefault((kernel, str(shape), version), []).append(result.timing.median_ms)
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    finally:
        for copy in copies:
            copy.unlink(missing_ok=True)
    rows = []
    print(f"{info.name}, {args.rounds} rounds, medians of the rounds' medians")
    print(
        f"{'kernel':16s} {'shape':>18s} {'before ms':>10s} {'after ms':>10s} {'after/before':>12s} {'cuBLAS ms':>10s}"
    )
    for kernel, shapes in CASES.items():
        for shape in shapes:
            before = statistics.median(times[(kernel, str(shape), "before")])
            after = statistics.median(times[(kernel, str(shape), "after")])
            lib = statistics.median(library.get((kernel, str(shape)), [float("nan")]))
            rows.append({"kernel": kernel, "shape": str(shape), "before_ms": before, "after_ms": after,
                         "cublas_ms": lib, "rounds_before": times[(kernel, str(shape), "before")],
                         "rounds_after": times[(kernel, str(shape), "after")]})  # fmt: skip
            print(f"{kernel:16s} {shape!s:>18s} {before:10.4f} {after:10.4f} {after / before:12.4f} {lib:10.4f}")
    args.out.write_text(json.dumps({"gpu": info.name, "rounds": args.rounds, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
