"""Two held-out runs of the same seed side by side (heldout_bench.py's
OUT.json files, e.g. the tree before a dispatcher change and after it): per
distribution and element type the geomean, 10th percentile and minimum of
the share of cuBLAS in each, and the points whose pick changed. Usage (no GPU):

    python3 benchmarks/scripts/heldout_compare.py BEFORE.json AFTER.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heldout_bench import summary


def main() -> None:
    before, after = (json.loads(Path(p).read_text()) for p in sys.argv[1:3])
    if before["seed"] != after["seed"]:
        sys.exit(f"the runs drew different shapes: seeds {before['seed']} and {after['seed']}")
    print(f"seed {before['seed']}; before: {sys.argv[1]} ({before['device']}, {before['date']}); "
          f"after: {sys.argv[2]} ({after['device']}, {after['date']})")  # fmt: skip
    keys = sorted({(p["distribution"], p["dtype"]) for p in before["points"]})
    for dist, dtype in keys:
        line = f"{dist:<14} {dtype:<9}"
        for run in (before, after):
            found = summary([p["percent"] for p in run["points"]
                             if (p["distribution"], p["dtype"]) == (dist, dtype) and "percent" in p])  # fmt: skip
            if found["count"]:
                line += f" | geomean {found['geomean']:6.1f}% p10 {found['p10']:6.1f}% min {found['min']:6.1f}%"
            else:
                line += " | no point measured"
        print(line)
    print("points whose pick changed (before -> after, % of cuBLAS):")
    for old, new in zip(before["points"], after["points"], strict=True):
        if old.get("kernel") != new.get("kernel") or old.get("config") != new.get("config"):
            shape = f"{new['m']}x{new['n']}x{new['k']}"
            print(f"  {new['distribution']:<14} {new['dtype']:<9} {shape:<18} {old.get('kernel', 'error')} "
                  f"{old.get('percent', float('nan')):.1f}% -> {new.get('kernel', 'error')} "
                  f"{new.get('percent', float('nan')):.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
