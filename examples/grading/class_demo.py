"""A class of generated submissions graded twice: by `gemmlab grade`'s local
default (one Dask worker per GPU), and on a Dask cluster this script starts
beside it and hands to `gemmlab grade --scheduler ADDRESS`.

    python examples/grading/class_demo.py --out demo/            # 40 submissions, both runs
    python examples/grading/class_demo.py --out demo/ --only cluster --workers 6

The submissions come from a few templates, each with a known outcome: correct
kernels of three speeds (a naive one with its thread indices swapped, so that
it reads uncoalesced, the same naive one coalesced, and shared-memory tiles),
wrong answers, compile errors, out-of-bounds writes and a kernel that spins for
ever at the large shapes only (so that the sanitizer's small shapes pass and
the watchdog stops it within the task's short timeout). The summary says, per
run, how many ended in each outcome, whether each was caught by the stage its
template expects, whether the leaderboard ranks the three speeds in order, and
the wall time in all and per submission.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TASK = """# The demo's task: small shapes and a short timeout, so that a class grades in minutes.
name = "class-demo"
problem = "matmul"
dtypes = ["float32"]
shapes = [384, [512, 256, 320]]
[hidden]
count = 1
seed = 424242
min = 256
max = 640
multiple = 32
[grades]
A = 0.4
B = 0.2
C = 0.02
pass = "verified"
[timing]
reps = 5
max_seconds = 0.3
timeout = 20
"""

DECLARATION = """function = "matmul"
problem = "matmul"
dtypes = ["float32"]
arguments = ["A", "B", "C", "M", "N", "K"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
block = ["TILE", "TILE"]
edge = "TILE"

[parameters]
TILE = [{tile}]
"""

HEAD = (
    "#define TILE {tile}\n\n"
    'extern "C" __global__ void matmul(const float *A, const float *B, float *C, int M, int N, int K)\n{{\n'
)

# One thread per element of C; {row} and {col} choose which thread index walks
# which dimension (threadIdx.x along a row of C reads B coalesced).
NAIVE = (
    HEAD
    + """    int row = blockIdx.y * TILE + threadIdx.{row};
    int col = blockIdx.x * TILE + threadIdx.{col};
    if (row >= M || col >= N) return;
    float sum = 0.0f;
    for (int i = 0; i < {k_end}; i++) sum += A[row * K + i] * B[i * N + col];
    C[row * N + col + {offset}] = sum{scale};
}}
"""
)

TILED = (
    HEAD
    + """    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < K; t += TILE) {{
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && t + threadIdx.y < K) ? B[(t + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; i++) sum += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }}
    if (row < M && col < N) C[row * N + col] = sum;
}}
"""
)

COMPILE_ERROR = (
    HEAD
    + """    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row < M && col < N) C[row * N + col] = {mistake};
}}
"""
)

# Spins for ever at the task's shapes (M >= 256), never at the sanitizer's small ones.
HANG = (
    HEAD
    + """    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= N) return;
    // __nanosleep is a side effect, so the compiler may not drop the loop (a
    // loop on a volatile local did not spin at all on an H100, 2026-11-24).
    // It spins past 65536 elements of C: beyond every shape the sanitizer runs
    // (at most 256 x 256, for 32-wide tiles), so that stage passes.
    while (M * N > 65536) {{ __nanosleep(1000); }}
    float sum = 0.0f;
    for (int i = 0; i < K; i++) sum += A[row * K + i] * B[i * N + col];
    C[row * N + col] = sum;
}}
"""
)


@dataclass(frozen=True)
class Kind:
    """A template and the stages that may stop it (``graded``: none). A wrong
    answer is caught by the sanitizer's own check of its small shapes, or
    else by verification. ``tier`` orders the correct kinds by speed: every
    one of a higher tier must rank above every one of a lower tier."""

    name: str
    expected: tuple[str, ...]
    count: int
    tier: int | None = None


KINDS = (
    Kind("correct-slow", ("graded",), 4, tier=1),  # naive, one thread per element of C, coalesced
    Kind("uncoalesced", ("graded",), 4, tier=0),  # the same naive kernel with its thread indices swapped
    Kind("correct-fast", ("graded",), 8, tier=2),  # shared-memory tiles
    Kind("wrong", ("sanitize", "verify"), 8),
    Kind("compile-error", ("compile",), 6),
    Kind("fault", ("sanitize",), 6),
    Kind("hang", ("verify", "time"), 4),  # "time" if the hidden shape is 256 x 256
)
TILES = (8, 16, 32)
MISTAKES = ("sum", "A[row * K] * undeclared", "B[col] +* 2.0f", "(float)A[row * K", "A[row * K] * B[col] K")


def source(kind: str, i: int) -> tuple[str, int]:
    """The .cu of the ``i``-th submission of ``kind``, and its tile edge."""
    tile = TILES[i % len(TILES)] if kind != "correct-fast" else (16, 32)[i % 2]
    naive = {"tile": tile, "row": "y", "col": "x", "k_end": "K", "offset": "0", "scale": ""}
    if kind == "correct-slow":
        return NAIVE.format(**naive), tile
    if kind == "uncoalesced":
        return NAIVE.format(**{**naive, "row": "x", "col": "y"}), tile
    if kind == "correct-fast":
        return TILED.format(tile=tile), tile
    if kind == "wrong":
        wrong = ({"k_end": "K - 1"}, {"scale": " * 1.001f"}, {"k_end": "K / 2"}, {"scale": " + 1.0f"})[i % 4]
        return NAIVE.format(**{**naive, **wrong}), tile
    if kind == "compile-error":
        return COMPILE_ERROR.format(tile=tile, mistake=MISTAKES[i % len(MISTAKES)]), tile
    if kind == "fault":
        return NAIVE.format(**{**naive, "offset": ("M * N", "(1 << 28)", "-N * 4")[i % 3]}), tile
    if kind == "hang":
        return HANG.format(tile=tile), tile
    raise ValueError(f"no template {kind!r}")


def generate(folder: Path, count: int = 40) -> dict[str, Kind]:
    """``count`` submissions in ``folder`` (one sub-folder each, named
    ``NN-kind``), the mix of KINDS scaled to ``count``; the kind of each by name."""
    folder.mkdir(parents=True, exist_ok=True)
    total = sum(k.count for k in KINDS)
    shares = [max(1, round(k.count * count / total)) for k in KINDS]
    shares[0] += count - sum(shares)  # whatever rounding left over goes to the first kind
    made: dict[str, Kind] = {}
    n = 0
    for kind, share in zip(KINDS, shares, strict=True):
        for i in range(share):
            n += 1
            name = f"{n:02d}-{kind.name}"
            sub = folder / name
            sub.mkdir(exist_ok=True)
            text, tile = source(kind.name, i)
            (sub / "matmul.cu").write_text(text)
            (sub / "matmul.toml").write_text(DECLARATION.format(tile=tile))
            made[name] = kind
    return made


def latest_grades(db: Path, task: str = "class-demo") -> dict[str, dict]:
    """Each submission's latest attempt in ``db``'s grades table."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute("SELECT * FROM grades WHERE task = ? ORDER BY attempt", (task,))]
    return {r["submission"]: r for r in rows}


def timed_rows(db: Path, task: str = "class-demo") -> dict[str, list[dict]]:
    """Each graded submission's timed shapes in ``db``: its time and cuBLAS's
    beside it, how each side was timed, and the SM clock right after."""
    query = """SELECT kernel, m, n, k, median_ms, baseline_median_ms, ratio_to_baseline, timing_method,
                      baseline_timing_method, sm_clock_after_mhz FROM results WHERE experiment = ? ORDER BY m, n, k"""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(query, (f"grade:{task}",))]
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["kernel"].split("/")[0], []).append(row)
    return out


def timing_lines(made: dict[str, Kind], grades: dict[str, dict], timed: dict[str, list[dict]]) -> list[str]:
    """Per graded submission and shape: kernel and cuBLAS times (us), their
    ratio, each side's method, the SM clock; then cuBLAS's spread per shape
    across the class (one library, one GPU: its times should agree)."""
    lines = ["   timed shapes (kernel us / cuBLAS us = share; methods; SM MHz after):"]
    by_shape: dict[str, list[float]] = {}
    for name in sorted(n for n in grades if grades[n]["stage"] == "graded"):
        cells = []
        for r in timed.get(name, []):
            shape = f"{r['m']}x{r['n']}x{r['k']}"
            by_shape.setdefault(shape, []).append(r["baseline_median_ms"])
            clock = f"{r['sm_clock_after_mhz']:.0f}" if r["sm_clock_after_mhz"] else "-"
            methods = f"{short(r['timing_method'])}; {short(r['baseline_timing_method'])}"
            cells.append(f"{shape} {r['median_ms'] * 1e3:.1f}/{r['baseline_median_ms'] * 1e3:.1f}="
                         f"{r['ratio_to_baseline']:.2f} ({methods}) {clock}")  # fmt: skip
        lines.append(f"     {name:18} {made[name].name:13} " + " | ".join(cells))
    for shape, times in sorted(by_shape.items()):
        lines.append(f"   cuBLAS at {shape}: {min(times) * 1e3:.1f} to {max(times) * 1e3:.1f} us over {len(times)} "
                     f"submissions (max/min {max(times) / min(times):.2f})")  # fmt: skip
    return lines


def short(method: str | None) -> str:
    """A stored timing method (Timing.method's words) in one word."""
    if not method:
        return "-"
    return "graph" if method.startswith("CUDA graph") else "back-to-back" if "back-to-back" in method else "events"


def summary(made: dict[str, Kind], grades: dict[str, dict], elapsed_s: float, label: str) -> tuple[str, int]:
    """The run's summary in words, and how many submissions ended elsewhere than their template expects."""
    outcomes = Counter(g["stage"] if g["stage"] != "graded" else f"graded {g['grade']}" for g in grades.values())
    wrong_stage = [n for n, kind in made.items() if grades.get(n, {}).get("stage") not in kind.expected]
    walls = [g["wall_s"] for g in grades.values() if g.get("wall_s") is not None]
    lines = [f"== {label}: {len(grades)} of {len(made)} graded in {elapsed_s:.0f} s of wall time"]
    lines += [f"   {what}: {n}" for what, n in sorted(outcomes.items())]
    if walls:
        lines.append(f"   per submission: {sum(walls) / len(walls):.1f} s on average, {min(walls):.1f} to "
                     f"{max(walls):.1f} s (workers' time, {sum(walls):.0f} s in all)")  # fmt: skip
    by_kind = Counter(made[n].name for n in made if n not in wrong_stage)
    lines += [f"   {k.name}: {by_kind[k.name]} of {sum(1 for m in made.values() if m == k)} ended at "
              f"{' or '.join(k.expected)}" for k in KINDS]  # fmt: skip
    for name in wrong_stage:
        got = grades.get(name)
        expected = " or ".join(made[name].expected)
        lines.append(f"   UNEXPECTED {name}: {got['stage'] if got else 'not graded'} (expected {expected})")
    order, misranked = ranking(made, grades)
    lines += order
    lines += [f"   UNEXPECTED order: {what}" for what in misranked]
    lines.append("   each submission: where it ended, its grade or what caught it, its wall time")
    for name in sorted(grades):
        g = grades[name]
        wall = f"{g['wall_s']:.1f} s" if g.get("wall_s") is not None else "-"
        said = f"grade {g['grade']}, {g['share_geomean']:.3f} of cuBLAS" if g["stage"] == "graded" else first_line(g)
        lines.append(f"     {name:18} {g['stage']:9} {wall:>7}  {said}")
    return "\n".join(lines), len(wrong_stage) + len(misranked)


def ranking(made: dict[str, Kind], grades: dict[str, dict]) -> tuple[list[str], list[str]]:
    """Each speed tier's range of shares of cuBLAS (fastest tier first), and
    each pair of neighbouring tiers that overlap: the leaderboard is right when
    every submission of a faster tier ranks above every one of a slower."""
    shares: dict[Kind, list[float]] = {}
    for name, kind in made.items():
        got = grades.get(name, {})
        if kind.tier is not None and got.get("stage") == "graded" and got.get("share_geomean"):
            shares.setdefault(kind, []).append(got["share_geomean"])
    tiers = sorted(shares, key=lambda k: -(k.tier or 0))
    lines = [f"   {k.name}: {min(shares[k]):.3f} to {max(shares[k]):.3f} of cuBLAS" for k in tiers]
    low, high = {k: min(v) for k, v in shares.items()}, {k: max(v) for k, v in shares.items()}
    overlaps = [f"slowest {faster.name} {low[faster]:.3f} <= fastest {slower.name} {high[slower]:.3f}"
                for faster, slower in itertools.pairwise(tiers) if low[faster] <= high[slower]]  # fmt: skip
    return lines, overlaps


def first_line(grade: dict) -> str:
    """The first line of a failure's reason, cut to fit a line."""
    reason = (grade.get("reason") or "").strip().splitlines()
    return reason[0][:110] if reason else ""


def grade(folder: Path, task: Path, out: Path, db: Path, scheduler: str | None, profile: bool = False) -> float:
    """`gemmlab grade` on the class; its wall time."""
    command = [sys.executable, "-m", "gemmlab", "grade", str(folder), "--task", str(task), "--db", str(db),
               "--out", str(out)] + (["--scheduler", scheduler] if scheduler else [])  # fmt: skip
    if profile:
        command.append("--profile")
    start = time.monotonic()
    subprocess.run(command, check=False)
    return time.monotonic() - start


def start_cluster(workers: int):
    """A LocalCluster of ``workers`` single-threaded processes on this host,
    allowed children (each submission runs in a watchdog child of its worker)."""
    import dask
    from distributed import LocalCluster

    dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.allowed-failures": 0})
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("class-demo"))
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--workers", type=int, default=4, help="workers of the cluster the script starts")
    parser.add_argument("--only", choices=("local", "cluster"), help="one of the two runs")
    parser.add_argument("--profile", action="store_true", help="grade with --profile (Nsight Compute per graded one)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the run's database: `gemmlab grade` picks up a run that was stopped")  # fmt: skip
    args = parser.parse_args()
    made = generate(args.out / "class", args.count)
    task = args.out / "task.toml"
    task.write_text(TASK)
    print(f"{len(made)} submissions in {args.out / 'class'}", flush=True)
    failures = 0
    runs = [r for r in ("local", "cluster") if args.only in (None, r)]
    for run in runs:
        db = args.out / f"{run}.sqlite"
        if not args.resume:
            db.unlink(missing_ok=True)
        if run == "local":
            elapsed = grade(args.out / "class", task, args.out / run, db, None, args.profile)
        else:
            with start_cluster(args.workers) as cluster:
                print(f"Dask cluster at {cluster.scheduler_address}: {args.workers} workers", flush=True)
                elapsed = grade(args.out / "class", task, args.out / run, db, cluster.scheduler_address, args.profile)
        grades = latest_grades(db)
        text, unexpected = summary(made, grades, elapsed, f"{run} ({db})")
        print(text, flush=True)
        print("\n".join(timing_lines(made, grades, timed_rows(db))), flush=True)
        failures += unexpected
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
