"""The catalogue's kernels against earlier copies of their source tree, timed
in alternation at the same shapes, each verified, the library beside.

Each copy is a folder laid out as src/gemmlab/kernels (the headers a rung
includes resolve inside the copy), made for instance with

    git archive REV src/gemmlab/kernels | tar -x -C /tmp/rev && mv /tmp/rev/src/gemmlab/kernels COPIES/before

For the run each copy is placed under the package's kernels folder as
_<name> and removed afterwards; its rungs take the ids RUNG@<name>. Each
round runs every rung, configuration, shape and type with the current source
and every copy, the order rotated by one each round, so clock drift and a
warm or cold L2 fall on all of them alike; the library (cuBLAS, or cuBLASLt
for the 8-bit types) is timed beside the current source. The figure kept is
the median over rounds of each version's median time. Usage, on a GPU
machine from the repository root:

    PYTHONPATH=src python3 benchmarks/scripts/source_ab.py COPIES OUT.json --rungs tc_fp8_tma_store
        [--shapes 4096,8192] [--dtypes e4m3,e4m3-bf16] [--rounds 3] [--configs '[{}, {"STAGGER": 1}]']

A shape is MxNxK, or N for a square (--sizes, the flag's former name, still
works). OUT.txt gets the table printed. Issue 23's synchronisation fixes
were timed by a single-file forerunner, sync_fix_ab.py (named in results of
2026-11-23 and 2026-11-24; in git's history); the same comparison is now,
with a copy of the tree before the fixes:

    ... source_ab.py COPIES OUT.json --rungs sgemm_stream_k --dtypes float32 --shapes 4096,4097,8192x8192x1024
    ... source_ab.py COPIES OUT.json --rungs sgemm_padded_b --dtypes float32 --shapes 4095,4097,4096
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from config_ab import parse_shape  # this script's folder is on sys.path when it runs

from gemmlab.core import gpu
from gemmlab.kernels import catalogue
from gemmlab.measure.run import run

KERNELS_DIR = Path(catalogue.__file__).parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("copies", type=Path, help="a folder of source trees, one folder each")
    parser.add_argument("out", type=Path)
    parser.add_argument("--rungs", required=True, help="comma-separated rung ids")
    parser.add_argument("--shapes", "--sizes", dest="shapes", default="4096,8192", help="MxNxK or N, comma-separated")
    parser.add_argument("--dtypes", default="e4m3,e4m3-bf16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default="[{}]", help="JSON list of configurations over each rung's default")
    args = parser.parse_args()
    names = sorted(p.name for p in args.copies.iterdir() if p.is_dir())
    shapes = [parse_shape(text) for text in args.shapes.split(",")]
    dtypes = args.dtypes.split(",")
    configs = json.loads(args.configs)
    info = gpu.describe(0)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    versions: dict[tuple[str, str], dict] = {}
    times: dict[tuple, list[float]] = {}
    library: dict[tuple, list[float]] = {}
    try:
        for name in names:
            shutil.rmtree(KERNELS_DIR / f"_{name}", ignore_errors=True)
            shutil.copytree(args.copies / name, KERNELS_DIR / f"_{name}")
        for rung in args.rungs.split(","):
            for config in configs:
                current = catalogue.variant(rung, config) if config else catalogue.get(rung)
                entry = {"current": current}
                for name in names:
                    entry[name] = dataclasses.replace(
                        current, id=f"{current.id}@{name}", source=f"_{name}/{current.source}"
                    )
                versions[(rung, json.dumps(config))] = entry
        for r in range(args.rounds):
            for (rung, config), entry in versions.items():
                order = list(entry.items())
                order = order[r % len(order) :] + order[: r % len(order)]
                for shape in shapes:
                    for dtype in dtypes:
                        for name, spec in order:
                            result = run(spec.id, shape, spec=spec, dtype=dtype,
                                         reps=10 if shape.m * shape.n * shape.k >= 8192**3 else 30,
                                         baseline=name == "current")  # fmt: skip
                            times.setdefault((rung, config, shape, dtype, name), []).append(result.timing.median_ms)
                            if result.baseline_timing is not None:
                                library.setdefault((rung, config, shape, dtype), []).append(
                                    result.baseline_timing.median_ms
                                )
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    finally:
        for name in names:
            shutil.rmtree(KERNELS_DIR / f"_{name}", ignore_errors=True)
    columns = ["current", *names]
    lines = [
        f"{info.name}, {started}, {args.rounds} rounds; medians of the rounds' median times (us)",
        f"{'rung':24s} {'configuration':26s} {'shape':>15s} {'type':10s} "
        + " ".join(f"{c[:10]:>10s}" for c in columns)
        + f" {'library':>9s} {'current %':>9s}",
    ]
    rows = []
    for (rung, config), _entry in versions.items():
        for shape in shapes:
            for dtype in dtypes:
                us = {c: statistics.median(times[(rung, config, shape, dtype, c)]) * 1e3 for c in columns}
                known = library.get((rung, config, shape, dtype))
                lib = statistics.median(known) * 1e3 if known else None
                share = f"{100 * lib / us['current']:8.1f}%" if lib else "        -"
                lines.append(
                    f"{rung:24s} {config:26s} {shape!s:>15s} {dtype:10s} "
                    + " ".join(f"{us[c]:10.1f}" for c in columns)
                    + (f" {lib:9.1f}" if lib else f" {'-':>9s}")
                    + f" {share}"
                )
                rows.append({"rung": rung, "config": config, "shape": [shape.m, shape.n, shape.k], "dtype": dtype,
                             "us": us, "library_us": lib,
                             "rounds_ms": {c: times[(rung, config, shape, dtype, c)] for c in columns}})  # fmt: skip
    text = "\n".join(lines)
    print(text)
    args.out.write_text(json.dumps({"gpu": info.name, "started": started, "rows": rows}, indent=1))
    args.out.with_suffix(".txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
