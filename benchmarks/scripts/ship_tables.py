"""Write the dispatcher tables gemmlab ships (src/gemmlab/studies/tables/)
from `dispatch_bench.py` results kept in benchmarks/results/: each file's picks,
filed under the GPU it names; for a GPU and element type given by several
files, the later file's picks win. A pick whose rung or configuration this
gemmlab no longer has, or that no longer takes its shape, is left out and
named. Usage (no GPU needed):

    python3 benchmarks/scripts/ship_tables.py RESULTS.json [RESULTS.json ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

TABLES = Path(__file__).resolve().parents[2] / "src" / "gemmlab" / "studies" / "tables"


def slug(gpu_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=TABLES, help="the folder to write into (default: the package's)")
    args = parser.parse_args()
    from gemmlab.core.shapes import Shape
    from gemmlab.kernels import catalogue
    from gemmlab.studies.dispatch import accepts

    by_gpu: dict[str, dict] = {}
    for path in args.results:
        found = json.loads(path.read_text())
        device = found["device"]
        table = by_gpu.setdefault(device["name"], {
            "gpu_name": device["name"], "cc": device["cc"], "sms": device["sm_count"],
            "clock_mhz": device["sm_clock_mhz"], "dram_gbs": round(device["peak_bandwidth_gbs"], 1),
            "sources": [], "picks": {}, "measurements": {},
        })  # fmt: skip
        table["sources"].append(f"benchmarks/results/{path.name}")
        for r in found["results"]:
            shape = Shape(r["m"], r["n"], r["k"])
            try:
                spec = catalogue.variant(r["kernel"], r.get("config") or {})
                why = accepts(spec, shape, r["dtype"], spec.compile_arch(device["arch"]))
            except Exception as exc:
                why = str(exc)
            if why:
                print(f"left out: {path.name}: {r['kernel']} {r.get('config')} at {shape} {r['dtype']}: {why}")
                continue
            table["picks"][(r["dtype"], r["m"], r["n"], r["k"])] = {
                "dtype": r["dtype"], "m": r["m"], "n": r["n"], "k": r["k"], "kernel": r["kernel"],
                "config": r.get("config") or {}, "median_ms": r["timing"]["median_ms"],
                "cublas_ms": (r.get("baseline_timing") or {}).get("median_ms"),
                "timing_method": r.get("timing_method"), "cublas_timing_method": r.get("baseline_timing_method"),
            }  # fmt: skip
            table["measured"] = max(table.get("measured", ""), r["host"]["date"][:10])
        for c in found.get("candidates", ()):  # every verified candidate timed (runs from 2026-11-29 on)
            table["measurements"][(c["dtype"], c["m"], c["n"], c["k"], c["kernel"], json.dumps(c["config"]))] = {
                key: c[key] for key in ("dtype", "m", "n", "k", "kernel", "config", "median_ms")
            }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in by_gpu.items():
        table["picks"] = sorted(table["picks"].values(), key=lambda p: (p["dtype"], p["m"], p["n"], p["k"]))
        table["measurements"] = sorted(table["measurements"].values(),
                                       key=lambda p: (p["dtype"], p["m"], p["n"], p["k"], p["kernel"]))  # fmt: skip
        out = args.out / f"{slug(name)}.json"
        out.write_text(json.dumps(table, indent=1) + "\n")
        print(f"{out}: {len(table['picks'])} picks and {len(table['measurements'])} other timings of {name}, "
              f"measured {table['measured']}")  # fmt: skip


if __name__ == "__main__":
    main()
