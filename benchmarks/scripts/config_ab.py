"""Configurations of one or more tunable rungs against each other and cuBLAS
at chosen shapes, in rounds whose order rotates, so that drifting clocks and a
warm or cold L2 fall on every configuration alike. Each run is gemmlab's runner
(verified; both sides from CUDA graphs below 50 us); the figure kept per rung,
configuration, shape and type is the median over rounds of its time and of its
share of cuBLAS. Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/config_ab.py OUT.json [--rungs tc_gemv]
        [--shapes 1x4096x4096,8x4096x4096,16x4096x4096,4096x16x4096] [--dtypes bfloat16,bfloat16-out]
        [--rounds 3] [--configs JSON-LIST]

A shape is MxNxK, or N for a square. --configs limits each rung to the given
configurations (a JSON list of {parameter: value} objects, each applied over
the rung's default), instead of its whole search. The defaults are the
tc_gemv study of the 1- to 16-row shapes (the former gemv_ab.py).
OUT.txt: a line per shape and type, the candidates fastest first.
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


def parse_shape(text: str) -> Shape:
    sizes = [int(part) for part in text.lower().split("x")]
    if len(sizes) == 1:
        return Shape(sizes[0], sizes[0], sizes[0])
    if len(sizes) != 3:
        raise SystemExit(f"shape {text!r}: give MxNxK or one square size N")
    return Shape(*sizes)


def label(rung: str, config: dict) -> str:
    return rung + " " + " ".join(f"{k}={v}" for k, v in config.items())


def median_or_none(ratios) -> float | None:
    """The median share of the baseline, or None where no run had a baseline
    (a scaling mode or type that the library has no call for)."""
    known = [r for r in ratios if r is not None]
    return statistics.median(known) if known else None


def share(ratio: float | None) -> str:
    return "   no baseline  " if ratio is None else f"{100 * ratio:6.1f}% of cuBLAS"


def precompile(candidates: list, shape: Shape, dtypes: list[str]) -> None:
    """Every candidate's cubin for every type, compiled ahead by the
    dispatcher's compile_candidates (several at a time), so that the rounds
    time kernels, not compiles. A configuration the rung refuses is left for
    its run, which reports why."""
    from gemmlab.studies.dispatch import Candidate
    from gemmlab.studies.dispatch_tuning import compile_candidates

    found = []
    for rung, config in candidates:
        try:
            found.append(Candidate(rung, config, catalogue.variant(rung, config)))
        except GemmlabError:
            pass
    arch = gpu.describe(0).arch
    for dtype in dtypes:
        compile_candidates(found, shape, dtype, arch)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--rungs", default="tc_gemv")
    parser.add_argument("--shapes", default="1x4096x4096,8x4096x4096,16x4096x4096,4096x16x4096")
    parser.add_argument("--dtypes", default="bfloat16,bfloat16-out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", help="a JSON list of configurations over each rung's default")
    args = parser.parse_args()
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    dtypes = args.dtypes.split(",")
    chosen = json.loads(args.configs) if args.configs else None
    candidates = []
    for rung in args.rungs.split(","):
        configs = catalogue.configs(rung)
        if chosen is not None:
            configs = [{**configs[0], **c} for c in chosen]
        candidates += [(rung, config) for config in configs]
    precompile(candidates, shapes[0], dtypes)
    found: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    failures = []
    for r in range(args.rounds):
        shift = r % len(candidates)
        for shape in shapes:
            for dtype in dtypes:
                for rung, config in candidates[shift:] + candidates[:shift]:
                    try:
                        spec = catalogue.variant(rung, config)
                        result = run(spec.id, shape, spec=spec, dtype=dtype, reps=20)
                    except GemmlabError as exc:
                        if r == 0:
                            failures.append({"candidate": label(rung, config), "shape": str(shape), "dtype": dtype,
                                             "error": str(exc).splitlines()[0]})  # fmt: skip
                        continue
                    key = (label(rung, config), str(shape), dtype)
                    found.setdefault(key, []).append((result.timing.median_ms * 1e3, result.ratio_to_baseline))
    rows = []
    for (candidate, shape, dtype), samples in found.items():
        rows.append({"candidate": candidate, "shape": shape, "dtype": dtype,
                     "us": statistics.median(s[0] for s in samples),
                     "ratio": median_or_none(s[1] for s in samples), "rounds": len(samples)})  # fmt: skip
    info = gpu.describe(0)
    args.out.write_text(json.dumps({"device": info.name, "rows": rows, "failures": failures}, indent=1, default=str))
    lines = [f"{args.rungs} on {info.name}, medians over {args.rounds} rounds"]
    for shape in shapes:
        for dtype in dtypes:
            mine = sorted((r for r in rows if r["shape"] == str(shape) and r["dtype"] == dtype), key=lambda r: r["us"])
            lines.append(f"{shape} {dtype}:")
            lines += [f"    {r['us']:8.2f} us  {share(r['ratio'])}  {r['candidate']}" for r in mine]
    lines += [f"not run: {f['candidate']} at {f['shape']} {f['dtype']}: {f['error']}" for f in failures]
    args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
