"""Honest figures before and after a change to the runner, timed in alternation.

Issue 48 changed how every timed launch is taken (a pool of input sets renewed
before each launch, a check after each, CUPTI around the window). Honest
kernels' figures must not move: this script runs the catalogue's headline
rungs and the examples under two source trees, round after round, the trees
alternating within each round (a fresh process per tree and round, one shared
compile cache), and prints each point's median time and share of the library
under both, with the shift.

    python3 benchmarks/scripts/runner_ab.py --before OLD/src --after src --rounds 3 --out ab.json

A tree's process is this file run with ``--child``: it imports gemmlab from
the tree given and writes one JSON line per point.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# (kernel or declaration, M, N, K, block edge or None, dtype)
POINTS = [
    ("sgemm_padded_b", 4096, 4096, 4096, None, "float32"),
    ("sgemm_padded_b", 2048, 2048, 2048, None, "float32"),
    ("tc_tma_store", 4096, 4096, 4096, None, "bfloat16"),
    ("tc_tma_store", 8192, 8192, 8192, None, "bfloat16"),
    ("tc_fp8_tma_store", 4096, 4096, 4096, None, "e4m3-bf16"),
    ("tc_int8_wgmma", 4096, 4096, 4096, None, "int8"),
    ("tiled", 1024, 1024, 1024, 16, "float32"),
    ("naive", 512, 512, 512, 16, "float32"),
    ("tiled_i32", 256, 256, 256, 16, "int32"),
    ("copy_vec4", 8192, 8192, 1, None, "float32"),
    ("examples/naive_define/matmul.toml", 256, 256, 256, None, "float32"),
    ("examples/tiled_template/matmul.toml", 1024, 1024, 1024, None, "float32"),
    ("examples/cupy_matmul/matmul.py", 2048, 2048, 2048, None, "float32"),
]


def child(points: list[tuple]) -> None:
    from gemmlab.core.shapes import Shape
    from gemmlab.kernels import catalogue
    from gemmlab.measure.run import run

    for kernel, m, n, k, edge, dtype in points:
        started = time.perf_counter()
        try:
            spec = catalogue.get(kernel) if "/" in kernel else None
            result = run(spec.id if spec else kernel, Shape(m, n, k), edge, dtype, spec=spec)
            row = {"kernel": kernel, "shape": [m, n, k], "dtype": dtype, "median_ms": result.timing.median_ms,
                   "ratio": result.ratio_to_baseline, "method": result.timing.method,
                   "baseline_ms": result.baseline_timing.median_ms if result.baseline_timing else None,
                   "interval": getattr(result, "ratio_interval", None), "sets": getattr(result, "input_sets", None),
                   "activity": getattr(result, "activity", ""), "seen": getattr(result, "kernels_seen", []),
                   "warnings": result.warnings}  # fmt: skip
        except Exception as exc:  # a failure is a finding: kept, and the rest go on
            row = {"kernel": kernel, "shape": [m, n, k], "dtype": dtype, "error": f"{type(exc).__name__}: {exc}"}
        row["wall_s"] = time.perf_counter() - started
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="the src folder of the tree before")
    parser.add_argument("--after", default="src")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", help="comma-separated kernels to keep")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    points = [p for p in POINTS if not args.only or p[0] in args.only.split(",")]
    if args.child:
        child(points)
        return
    trees = {"after": args.after} if not args.before else {"before": args.before, "after": args.after}
    rows: list[dict] = []
    for r in range(args.rounds):
        for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([trees[name], os.environ.get("PYTHONPATH", "")])}
            started = time.perf_counter()
            out = subprocess.run([sys.executable, __file__, "--child", *(["--only", args.only] if args.only else [])],
                                 env=env, capture_output=True, text=True, check=False)  # fmt: skip
            for line in out.stdout.splitlines():
                if line.startswith("{"):
                    rows.append({**json.loads(line), "tree": name, "round": r})
            print(f"round {r} {name}: {time.perf_counter() - started:.1f} s, exit {out.returncode}", flush=True)
            if out.returncode:
                print(out.stderr[-3000:], flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    print(f"{'point':58} {'tree':6} {'median ms':>10} {'ratio':>7} {'wall s':>7}  method / error")
    for kernel, m, n, k, _edge, dtype in points:
        for name in trees:
            mine = [r for r in rows if r["kernel"] == kernel and r["shape"] == [m, n, k] and r["tree"] == name]
            ok = [r for r in mine if "error" not in r]
            label = f"{kernel} {m}x{n}x{k} {dtype}"[:58]
            if not ok:
                print(f"{label:58} {name:6} {'-':>10} {'-':>7} {'-':>7}  {mine[0]['error'][:150] if mine else '?'}")
                continue
            ms = statistics.median(r["median_ms"] for r in ok)
            ratio = statistics.median(r["ratio"] for r in ok if r["ratio"]) if any(r["ratio"] for r in ok) else 0
            wall = statistics.median(r["wall_s"] for r in ok)
            print(f"{label:58} {name:6} {ms:10.4f} {ratio:7.3f} {wall:7.2f}  {ok[0]['method']}")


if __name__ == "__main__":
    main()
