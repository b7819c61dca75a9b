"""tc_gemv's configurations against each other and cuBLAS at the 1- to 16-row
shapes, in rounds whose order rotates, so that drifting clocks and a warm or
cold L2 fall on every configuration alike. Each run is gemmlab's runner (both
sides from CUDA graphs below 50 us, verified); the figure kept per
configuration, shape and type is the median over rounds of its time and of
its share of cuBLAS. Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/gemv_ab.py OUT.json [--rounds 3]

OUT.txt: a line per shape and type, the configurations fastest first.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.run import run

SHAPES = [Shape(1, 4096, 4096), Shape(8, 4096, 4096), Shape(16, 4096, 4096), Shape(4096, 16, 4096)]
DTYPES = ["bfloat16", "bfloat16-out"]


def label(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    configs = catalogue.configs("tc_gemv")
    found: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    failures = []
    for r in range(args.rounds):
        shift = r % len(configs)
        for shape in SHAPES:
            for dtype in DTYPES:
                for config in configs[shift:] + configs[:shift]:
                    spec = catalogue.variant("tc_gemv", config)
                    try:
                        result = run(spec.id, shape, spec=spec, dtype=dtype, reps=20)
                    except GemmlabError as exc:
                        failures.append({"config": config, "shape": str(shape), "dtype": dtype, "error": str(exc)})
                        continue
                    key = (label(config), str(shape), dtype)
                    found.setdefault(key, []).append((result.timing.median_ms * 1e3, result.ratio_to_baseline))
    rows = []
    for (config, shape, dtype), samples in found.items():
        rows.append({"config": config, "shape": shape, "dtype": dtype,
                     "us": statistics.median(s[0] for s in samples),
                     "ratio": statistics.median(s[1] for s in samples), "rounds": len(samples)})  # fmt: skip
    info = gpu.describe(0)
    args.out.write_text(json.dumps({"device": info.name, "rows": rows, "failures": failures}, indent=1, default=str))
    lines = [f"tc_gemv configurations on {info.name}, medians over {args.rounds} rounds"]
    for shape in SHAPES:
        for dtype in DTYPES:
            mine = sorted((r for r in rows if r["shape"] == str(shape) and r["dtype"] == dtype), key=lambda r: r["us"])
            lines.append(f"{shape} {dtype}:")
            lines += [f"    {r['us']:7.2f} us  {100 * r['ratio']:6.1f}% of cuBLAS  {r['config']}" for r in mine]
    args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
