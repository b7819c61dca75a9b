"""Is the dispatcher at cuBLAS speed on every shape? Tunes the dispatcher on
the chosen suite (src/gemmlab/studies/shapes.toml; --tune quick to tune only the quick
subset and see what the model gives the others; --suite-file for another
suite, such as sample_suite.py's draw) on this GPU, then runs its pick for
every shape of the chosen suite beside cuBLAS (verified against float64 first,
timed in alternation; both sides from CUDA graphs or back-to-back launches
below about 50 us) and prints % of cuBLAS per shape and the geometric mean per
element type, against the issue's targets (FP32: 100% mean, 90% each; BF16:
105% mean, 95% each). Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/dispatch_bench.py OUT.json [--suite quick|full]
        [--tune quick|full] [--suite-file PATH] [--db PATH] [--dtype fp32,bf16,bf16-out,fp8,fp8-bf16]
        [--budget-seconds S] [--shape-seconds S]

OUT.json holds {"device", "tuning": [the tuner's summary in words], "results":
[RunResult.to_dict() plus "pick" (tuned / model / default), "why",
"timing_method" and "baseline_timing_method"], "geomean": {dtype: %},
"candidates": [every verified candidate the tuning timed on this GPU]}; the
table goes to stdout and to OUT.txt. The database (default: OUT.sqlite beside
OUT.json) keeps the picks, so a second run resumes the tuning.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from gemmlab.api.matmul import clear_cache, dispatch
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.measure.run import run
from gemmlab.store.records import Config
from gemmlab.store.store import Store
from gemmlab.studies import dispatch_tuning as tuner
from gemmlab.studies.suite import dtype_name, load_suite
from gemmlab.studies.sweep import run_record

TARGETS = {"float32": (100.0, 90.0), "bfloat16": (105.0, 95.0), "bfloat16-out": (105.0, 95.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--suite", default="quick", choices=("quick", "full"))
    parser.add_argument(
        "--tune",
        choices=("quick", "full"),
        help="the suite to tune on (default: --suite's; quick with --suite full measures the nearest picks)",
    )
    parser.add_argument("--suite-file", type=Path, help="a suite file (default: the one gemmlab ships)")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--dtype", help="fp32,bf16,bf16-out (default: the suite's)")
    parser.add_argument("--budget-seconds", type=float)
    parser.add_argument(
        "--shape-seconds",
        type=float,
        default=tuner.SHAPE_SECONDS,
        help="seconds of timing per shape, compiling not counted (0: no limit)",
    )
    args = parser.parse_args()
    db = args.db or args.out.with_suffix(".sqlite")
    suite = load_suite(args.suite, args.suite_file)
    dtypes = [dtype_name(d) for d in args.dtype.split(",")] if args.dtype else list(suite.dtypes)

    start = time.monotonic()
    with Store.open(db) as store:
        tuned_on = load_suite(args.tune or args.suite, args.suite_file)
        summary = tuner.tune_suite(tuned_on, store, dtypes=dtypes, run_record=run_record(),
                                   budget_seconds=args.budget_seconds, on_candidate=print,
                                   shape_seconds=args.shape_seconds or None)  # fmt: skip
    tuning_seconds = time.monotonic() - start
    clear_cache()
    # Every verified candidate the tuning timed, for the model's correction (ship_tables.py keeps them).
    name = gpu.describe(0).name
    with Store.open(db, readonly=True) as store:
        candidates = [{key: row[key] for key in ("dtype", "m", "n", "k", "kernel", "median_ms", "baseline_median_ms")}
                      | {"config": Config(row.get("config") or "").values}
                      for row in store.rows(tuner.EXPERIMENT) if row.get("gpu_name") == name]  # fmt: skip

    results, lines = [], []
    for dtype in dtypes:
        for entry in suite.shapes:
            try:
                choice, spec = dispatch(entry.shape, dtype, db)
                r = run(choice.kernel, entry.shape, None, dtype, spec=spec, reps=entry.reps)
            except GemmlabError as exc:
                lines.append(f"{dtype:13s} {entry.shape!s:>16s}  not run: {exc}")
                continue
            share = 100.0 * r.ratio_to_baseline
            methods = {"timing_method": r.timing.method, "baseline_timing_method": r.baseline_timing.method}
            results.append({**r.to_dict(), "pick": choice.reason, "why": choice.why(), "share": share, **methods})
            lines.append(f"{dtype:13s} {entry.shape!s:>16s}  {share:6.1f}%  {choice.kernel} ({choice.reason})  "
                         f"ours: {r.timing.method}; cuBLAS: {r.baseline_timing.method}")  # fmt: skip
    geomean = {}
    for dtype in dtypes:
        shares = [r["share"] for r in results if r["dtype"] == dtype]
        if shares:
            geomean[dtype] = math.exp(sum(math.log(s) for s in shares) / len(shares))
            mean_target, each_target = TARGETS.get(dtype, (100.0, 90.0))
            lines.append(f"{dtype}: geometric mean {geomean[dtype]:.1f}% (target {mean_target:.0f}%), lowest "
                         f"{min(shares):.1f}% (target {each_target:.0f}%)")  # fmt: skip
    text = "\n".join([*summary.lines(), f"tuning took {tuning_seconds:.0f} s", *lines])
    print(text)
    args.out.with_suffix(".txt").write_text(text + "\n")
    device = gpu.describe(0).to_dict()
    args.out.write_text(json.dumps({"device": device, "tuning": summary.lines(), "tuning_seconds": tuning_seconds,
                                    "results": results, "geomean": geomean, "candidates": candidates}, indent=2,
                                   default=str))  # fmt: skip


if __name__ == "__main__":
    main()
