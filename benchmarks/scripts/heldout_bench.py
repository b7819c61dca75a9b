"""The dispatcher on shapes nobody tuned for (issue 50): draws shapes from
stated distributions with a fresh seed, runs the dispatcher's pick for each
beside cuBLAS, and reports the geometric mean, the 10th percentile and the
minimum of the share of cuBLAS, per distribution and element type. The seed is
kept with the result, so a draw can be run again; the figure to quote is a
fresh draw's, not the tuned suite's.

The distributions:
  log-uniform   each of M, N, K drawn log-uniformly from 16 to 16384
  llm           a token count (1 to 8192, log-uniform, rounded) against one
                projection of an 8B-class model's layer or its vocabulary
  squares-rects squares and 1:2, 1:4 and 1:8 rectangles, sides from 256 to 16384

Each point goes through gemmlab's runner (gemmlab.measure.run.run): the pick
verified against a float64 reference, then timed beside cuBLAS in alternated
rounds, from CUDA graphs on both sides under about 50 us. Usage, on a GPU:

    PYTHONPATH=src python3 benchmarks/scripts/heldout_bench.py OUT.json [--seed S] [--count N]
        [--dists log-uniform,llm,squares-rects] [--dtype fp32,bf16] [--db PATH] [--no-shipped]

OUT.json holds {"seed", "device", "date", "points": [{"distribution", "dtype",
"m", "n", "k", "kernel", "pick", "percent"} or, for a point that failed,
"error"], "summary": {distribution: {dtype: {"geomean", "p10", "min", "count"}}}};
the table goes to stdout. --db names the dispatcher's table (default: none, what
a newcomer gets: the table shipped for this GPU and the cost model);
--no-shipped leaves the shipped table out (the model alone, or with --db's picks).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import random
import secrets
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

LOW, HIGH = 16, 16384
# An 8B-class decoder layer's projections (hidden 4096, MLP 14336, grouped-query
# K/V of 8 heads of 128) and its vocabulary head, as (N, K) of x . W^T.
LLM_WEIGHTS = ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (28672, 4096), (128256, 4096))
RECT_RATIOS = (1, 2, 4, 8)


def log_uniform(rng: random.Random, low: int = LOW, high: int = HIGH) -> int:
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


def draw_log_uniform(rng: random.Random) -> tuple[int, int, int]:
    return log_uniform(rng), log_uniform(rng), log_uniform(rng)


def draw_llm(rng: random.Random) -> tuple[int, int, int]:
    n, k = rng.choice(LLM_WEIGHTS)
    return log_uniform(rng, 1, 8192), n, k


def draw_squares_rects(rng: random.Random) -> tuple[int, int, int]:
    side = log_uniform(rng, 256, HIGH)
    ratio = rng.choice(RECT_RATIOS)
    long_side, short_side = side, max(LOW, side // ratio)
    dims = [long_side, long_side, long_side] if ratio == 1 else [long_side, short_side, long_side]
    rng.shuffle(dims)
    return dims[0], dims[1], dims[2]


DISTRIBUTIONS: dict[str, Callable[[random.Random], tuple[int, int, int]]] = {
    "log-uniform": draw_log_uniform,
    "llm": draw_llm,
    "squares-rects": draw_squares_rects,
}


def draw(distribution: str, count: int, seed: int) -> list[tuple[int, int, int]]:
    """``count`` shapes of ``distribution``, the same for the same seed (each
    distribution has its own stream, so adding one does not change another's)."""
    rng = random.Random(f"{seed}:{distribution}")
    return [DISTRIBUTIONS[distribution](rng) for _ in range(count)]


def summary(percents: Sequence[float]) -> dict[str, float | int]:
    """Geometric mean, 10th percentile (nearest rank) and minimum of shares of cuBLAS in %."""
    ordered = sorted(percents)
    if not ordered:
        return {"count": 0}
    rank = max(1, math.ceil(0.10 * len(ordered)))
    geomean = math.exp(sum(math.log(p) for p in ordered) / len(ordered))
    return {"count": len(ordered), "geomean": geomean, "p10": ordered[rank - 1], "min": ordered[0]}


def measure(points: list[dict], db: Path | None) -> None:
    """Each point's pick run beside cuBLAS, written into the point (GPU work)."""
    from gemmlab.api.matmul import clear_cache, dispatch
    from gemmlab.core.errors import GemmlabError
    from gemmlab.core.shapes import Shape
    from gemmlab.measure.run import run

    clear_cache()
    # No --db: a path with no file, so that no table is read (not even $GEMMLAB_DB or one in this folder).
    db = db if db is not None else Path(tempfile.mkdtemp(prefix="heldout-")) / "no-picks.sqlite"
    for point in points:
        shape = Shape(point["m"], point["n"], point["k"])
        try:
            choice, spec = dispatch(shape, point["dtype"], db)
            result = run(choice.kernel, shape, None, point["dtype"], spec=spec)
        except GemmlabError as exc:
            point["error"] = f"{exc.cause} {exc.fix}".strip()
            continue
        if result.ratio_to_baseline is None:
            point["error"] = "no library baseline was timed beside it"
            continue
        percent = 100.0 * result.ratio_to_baseline
        point.update(kernel=choice.kernel, config=choice.config, pick=choice.reason, percent=percent)
        print(f"{point['distribution']:<14} {point['dtype']:<9} {shape!s:<20} {choice.kernel:<26} "
              f"{point['percent']:6.1f}%", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, help="default: a fresh one, kept in OUT.json")
    parser.add_argument("--count", type=int, default=40, help="shapes per distribution")
    parser.add_argument("--dists", default=",".join(DISTRIBUTIONS))
    parser.add_argument("--dtype", default="fp32,bf16")
    parser.add_argument("--db", type=Path, help="the dispatcher's table (default: none)")
    parser.add_argument("--no-shipped", action="store_true", help="leave out the table gemmlab ships for this GPU")
    args = parser.parse_args()
    if args.no_shipped:
        import os

        from gemmlab.api.matmul import NO_SHIPPED_VARIABLE

        os.environ[NO_SHIPPED_VARIABLE] = "1"
    from gemmlab.core import gpu
    from gemmlab.studies.suite import dtype_name

    seed = args.seed if args.seed is not None else secrets.randbits(32)
    dists = [d.strip() for d in args.dists.split(",") if d.strip()]
    unknown = [d for d in dists if d not in DISTRIBUTIONS]
    if unknown:
        parser.error(f"unknown distribution(s) {', '.join(unknown)}; known: {', '.join(DISTRIBUTIONS)}")
    dtypes = [dtype_name(d.strip()) for d in args.dtype.split(",") if d.strip()]
    points = [{"distribution": d, "dtype": t, "m": m, "n": n, "k": k}
              for d in dists for (m, n, k) in draw(d, args.count, seed) for t in dtypes]  # fmt: skip
    print(f"seed {seed}: {len(points)} points", flush=True)
    measure(points, args.db)
    table = {d: {t: summary([p["percent"] for p in points if (p["distribution"], p["dtype"]) == (d, t)
                             and "percent" in p]) for t in dtypes} for d in dists}  # fmt: skip
    for d, by_dtype in table.items():
        for t, s in by_dtype.items():
            if s["count"]:
                print(f"{d:<14} {t:<9} geomean {s['geomean']:6.1f}%  p10 {s['p10']:6.1f}%  min {s['min']:6.1f}%"
                      f"  ({s['count']} shapes)")  # fmt: skip
    failed = sum(1 for p in points if "error" in p)
    if failed:
        print(f"{failed} point(s) failed; their errors are in {args.out}")
    record = {"seed": seed, "device": gpu.describe(0).name,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "db": str(args.db) if args.db else None, "shipped_table": not args.no_shipped, "points": points,
              "summary": table}  # fmt: skip
    args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
