"""A shape suite drawn at random, for the dispatcher's shipped tables (issue
50: a table "filled from a dense or random sample of shapes across the space,
not only the suite"): the three distributions of heldout_bench.py, with a
stated seed, written as a suite file that `gemmlab dispatch tune --suite-file`
and `dispatch_bench.py --suite-file` read. Quote held-out figures only from a
different seed (heldout_bench.py draws a fresh one by default). No GPU:

    python3 benchmarks/scripts/sample_suite.py OUT.toml --seed S [--count 20] [--max-side 131072]
        [--dtypes float32,bfloat16,bfloat16-out]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_bench import DISTRIBUTIONS, draw


def suite_text(seed: int, count: int, max_side: int, dtypes: list[str]) -> str:
    """The suite file: a group per distribution, each shape in the quick
    subset too; shapes with a side over ``max_side`` left out."""
    lines = [f"# Drawn by benchmarks/scripts/sample_suite.py with seed {seed}, {count} shapes per distribution,",
             f"# sides up to {max_side}: the dispatcher's tuning sample, not a held-out draw.",
             f"dtypes = [{', '.join(repr(d).replace(chr(39), chr(34)) for d in dtypes)}]"]  # fmt: skip
    for name in DISTRIBUTIONS:
        shapes = sorted({s for s in draw(name, count, seed) if max(s) <= max_side})
        listed = ", ".join(f"[{m}, {n}, {k}]" for m, n, k in shapes)
        lines += ["", "[[group]]", f'name = "{name}"', f"shapes = [{listed}]", f"quick = [{listed}]",
                  "reps = 10"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, required=True, help="kept in the file's first line")
    parser.add_argument("--count", type=int, default=20, help="shapes drawn per distribution")
    parser.add_argument("--max-side", type=int, default=131072, help="leave out shapes with a longer side")
    parser.add_argument("--dtypes", default="float32,bfloat16,bfloat16-out")
    args = parser.parse_args()
    args.out.write_text(suite_text(args.seed, args.count, args.max_side, args.dtypes.split(",")))
    print(f"{args.out}: seed {args.seed}")


if __name__ == "__main__":
    main()
