"""Does tuning close the gap to cuBLAS? Tunes sgemm_multistage and
sgemm_double_buffer at N = 4096 on this GPU within one time budget (150 s by
default, shared: what one kernel leaves, the next may use), then runs each
kernel's tuned and default configurations side by side with cuBLAS at 4096 and
8192 (20 repetitions each; every run verified against float64 first). At 8192
(size class "large") the configuration tuned at 4096 ("medium") runs: does it
carry over? Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/tune_bench.py OUT.json [--budget-seconds 150] [--db PATH]
        [--kernels sgemm_lean_loop ...]

--kernels: other rungs to tune instead of those two.

OUT.json holds {"device": ..., "tuning": [per kernel: budget, seconds, the
summary in words, the chosen configuration, every candidate row], "results":
[RunResult.to_dict() plus "which" (tuned / default) and "tuned_on"]}; a table
goes to stdout. The database (default: OUT.sqlite beside OUT.json) keeps the
candidates, so a second run resumes the search instead of repeating it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.run import run
from gemmlab.store.store import Store
from gemmlab.studies.tune import config_label, size_class, tune

KERNELS = ("sgemm_multistage", "sgemm_double_buffer")
TUNE_SHAPE = Shape.square(4096)
RUN_SHAPES = (Shape.square(4096), Shape.square(8192))
REPS = 20


def tune_all(store: Store, budget_s: float, kernels: tuple[str, ...]) -> tuple[list[dict], dict[str, dict]]:
    """Tune every kernel, sharing the budget; returns the records and the chosen configuration per kernel."""
    records, chosen = [], {}
    deadline = time.monotonic() + budget_s
    for i, kernel in enumerate(kernels):
        share = max(0.0, deadline - time.monotonic()) / (len(kernels) - i)
        start = time.monotonic()
        summary = tune(kernel, [TUNE_SHAPE], store, budget_seconds=share)
        spent = time.monotonic() - start
        for line in summary.lines():
            print(line, flush=True)
        best = summary.best.get(size_class(TUNE_SHAPE))
        if best is not None:
            chosen[kernel] = best.config
            print(f"{kernel}: {config_label(best.config)}: {best.gflops:,.0f} GFLOPS, "
                  f"{best.gain_over_default or 0:.3f}x the default, {best.ratio_to_cublas or 0:.1%} of cuBLAS "
                  f"({spent:.0f} s of {share:.0f})", flush=True)  # fmt: skip
        rows = store.candidates(summary.gpu_name, kernel)
        records.append({
            "kernel": kernel, "budget_s": share, "seconds": spent, "summary": summary.lines(),
            "chosen": None if best is None else {
                "config": best.config, "gflops": best.gflops, "default_gflops": best.default_gflops,
                "ratio_to_cublas": best.ratio_to_cublas, "shapes": [[s.m, s.n, s.k] for s in best.shapes],
            },
            "candidates": rows,
        })  # fmt: skip
    return records, chosen


def side_by_side(chosen: dict[str, dict], kernels: tuple[str, ...]) -> list[dict]:
    print(f"\n{'kernel':20s} {'which':8s} {'N':>5s} {'ms':>8s} {'GFLOPS':>8s} {'cuBLAS':>8s} {'ratio':>6s} "
          f"{'err':>8s}  configuration")  # fmt: skip
    records = []
    for kernel in kernels:
        for shape in RUN_SHAPES:
            variants = [("default", None)]
            if kernel in chosen:
                variants.append(("tuned", catalogue.variant(kernel, chosen[kernel])))
            for which, spec in variants:
                try:
                    r = run(kernel, shape, spec=spec, reps=REPS, max_seconds=5)
                except GemmlabError as exc:
                    print(f"{kernel:20s} {which:8s} {shape.m:5d} {exc}", flush=True)
                    continue
                tuned_on = size_class(TUNE_SHAPE) if spec is not None else None
                records.append({**r.to_dict(), "which": which, "tuned_on": tuned_on})
                print(f"{kernel:20s} {which:8s} {shape.m:5d} {r.timing.median_ms:8.3f} {r.gflops:8.0f} "
                      f"{r.baseline_gflops or 0:8.0f} {r.ratio_to_baseline or 0:6.1%} {r.error:8.1e}  "
                      f"{config_label(r.config or {})}", flush=True)  # fmt: skip
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="JSON file to write")
    parser.add_argument("--budget-seconds", type=float, default=150.0, help="time for all the tuning together")
    parser.add_argument("--db", help="tuning database (default: OUT.sqlite beside OUT.json)")
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), help="the rungs to tune")
    args = parser.parse_args()
    kernels = tuple(args.kernels)
    out = Path(args.out)
    info = gpu.describe(0)
    print(f"{info.name} ({info.arch}), {info.sm_count} SMs, FP32 peak {info.peak_fp32_gflops or 0:.0f} GFLOPS",
          flush=True)  # fmt: skip
    start = time.monotonic()
    with Store.open(args.db or out.with_suffix(".sqlite")) as store:
        tuning, chosen = tune_all(store, args.budget_seconds, kernels)
    results = side_by_side(chosen, kernels)
    print(f"({time.monotonic() - start:.0f} s)")
    with open(out, "w") as fh:
        json.dump({"device": info.to_dict(), "tuning": tuning, "results": results}, fh, indent=1, default=list)


if __name__ == "__main__":
    main()
