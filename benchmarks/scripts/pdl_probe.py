"""Programmatic dependent launch (PDL) on and off, for the rungs that wait
for the launch before them (KernelSpec.dependent_launch: tc_small,
sgemm_small_tile, sgemm_split_k and sgemm_cluster_split_k; tc_gemv was, and
lost by it).

docs/dispatch.md (2026-11-28) found that at the skinny BF16 shapes one call
of ours alone takes as long as cuBLAS's, while in the suite's CUDA graphs of
back-to-back calls ours measured 84-94% of it: the time goes between
launches. This script times the same picks through gemmlab's runner
(verified; both sides from CUDA graphs, in alternation) twice in each round,
with $GEMMLAB_DEPENDENT_LAUNCH=0 (launched as any kernel) and unset (launched
with PDL on compute capability 9.0 and newer), the order alternating from
round to round. Its first run, on tree 95df87f, patched the launch of
kernels that did not yet wait (a probe, racing on C's identical values);
since then the rungs wait and the runner decides. Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/pdl_probe.py OUT.txt [--rounds 3] [--dtypes float32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

CSK = {"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 32, "STAGES": 4}  # sgemm_cluster_split_k's small tiles
CSK_128 = {"BM": 128, "BN": 128, "WM": 64, "WN": 32, "STAGES": 4, "SPLITS": 2, "GROUPS": 1}
CASES = (
    ("bfloat16-out", (4096, 128, 4096), "tc_small", {"BM": 64, "BN": 128, "STAGES": 8, "SPLITS": 2}),
    ("bfloat16", (4096, 128, 4096), "tc_small", {"BM": 64, "BN": 128, "STAGES": 8, "SPLITS": 2}),
    ("bfloat16-out", (4096, 64, 4096), "tc_small", {"BM": 64, "BN": 64, "STAGES": 8, "SPLITS": 2}),
    ("bfloat16", (64, 4096, 4096), "tc_small", {"BM": 64, "BN": 64, "STAGES": 8, "SPLITS": 2}),
    # tc_gemv no longer asks for PDL: its two rows are a control (on and off should agree).
    ("bfloat16-out", (16, 4096, 4096), "tc_gemv", {"MAX_M": 16, "WARPS": 16, "UNROLL": 2}),
    ("bfloat16", (8, 4096, 4096), "tc_gemv", {"MAX_M": 8, "WARPS": 8, "UNROLL": 4}),
    ("bfloat16", (1000, 1000, 1000), "tc_small", {"BM": 128, "BN": 64, "STAGES": 4, "PAIR_COLS": 2}),
    ("bfloat16", (512, 512, 512), "tc_small", {"BM": 64, "BN": 64, "STAGES": 4, "SPLITS": 2}),
    # The FP32 picks of the H100's last full suite (2026-11-24o_h100_dispatch-full-fp32-final.json).
    ("float32", (128, 128, 128), "sgemm_small_tile", {"BM": 32, "BN": 32, "WM": 16, "STAGES": 3, "MIN_BLOCKS": 4}),
    ("float32", (256, 256, 256), "sgemm_split_k", {"BM": 64, "BN": 64, "STAGES": 3, "SPLITS": 4}),
    ("float32", (512, 512, 512), "sgemm_cluster_split_k", CSK | {"SPLITS": 2, "GROUPS": 2}),
    ("float32", (1000, 1000, 1000), "sgemm_cluster_split_k", CSK_128 | {"BK": 8}),
    ("float32", (16, 4096, 4096), "sgemm_split_k", {"BM": 32, "BN": 32, "STAGES": 3, "SPLITS": 16}),
    ("float32", (64, 4096, 4096), "sgemm_cluster_split_k", CSK | {"SPLITS": 2, "GROUPS": 4}),
    ("float32", (128, 4096, 4096), "sgemm_cluster_split_k", CSK | {"SPLITS": 2, "GROUPS": 2}),
    ("float32", (4096, 64, 4096), "sgemm_cluster_split_k", CSK | {"BM": 128, "BN": 64, "SPLITS": 2, "GROUPS": 4}),
    ("float32", (4096, 128, 4096), "sgemm_cluster_split_k", CSK | {"SPLITS": 2, "GROUPS": 2}),
)


def set_dependent_launch(pdl: bool) -> None:
    """Let the runner launch with PDL (its default) or not."""
    from gemmlab.backends.nvrtc import DEPENDENT_LAUNCH_ENV

    if pdl:
        os.environ.pop(DEPENDENT_LAUNCH_ENV, None)
    else:
        os.environ[DEPENDENT_LAUNCH_ENV] = "0"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dtypes", default="", help="only these element types (comma-separated), e.g. float32")
    a = p.parse_args(argv)
    from gemmlab.core.shapes import Shape
    from gemmlab.kernels import catalogue
    from gemmlab.measure.run import run

    cases = [c for c in CASES if not a.dtypes or c[0] in a.dtypes.split(",")]
    shares: dict[tuple, list[float]] = {}
    times: dict[tuple, list[float]] = {}
    for rnd in range(a.rounds):
        for dtype, (m, n, k), rung, config in cases:
            spec = catalogue.variant(rung, config)
            order = (False, True) if rnd % 2 == 0 else (True, False)
            for pdl in order:
                set_dependent_launch(pdl)
                try:
                    r = run(spec.id, Shape(m, n, k), dtype=dtype, spec=spec, reps=20)
                except Exception as exc:  # a case that fails is reported, the others go on
                    print(f"{dtype} {m}x{n}x{k} {rung} pdl={pdl}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                key = (dtype, m, n, k, rung, json.dumps(config), pdl)
                us, share = 1e3 * r.timing.median_ms, 100 * r.ratio_to_baseline
                shares.setdefault(key, []).append(share)
                times.setdefault(key, []).append(us)
                print(f"round {rnd}: {key} {us:.2f} us, {share:.1f}%", file=sys.stderr, flush=True)
    set_dependent_launch(True)  # the runner's default again
    lines = [f"medians over {a.rounds} rounds; share = cuBLAS's time / ours, both from CUDA graphs, in alternation"]
    for dtype, (m, n, k), rung, config in cases:
        row = []
        for pdl in (False, True):
            key = (dtype, m, n, k, rung, json.dumps(config), pdl)
            if key in shares:
                row.append(f"{'PDL' if pdl else 'plain'} {statistics.median(times[key]):7.2f} us "
                           f"{statistics.median(shares[key]):6.1f}%")  # fmt: skip
        lines.append(f"{dtype:13s} {m}x{n}x{k:<6d} {rung:13s} " + "   ".join(row))
    text = "\n".join(lines) + "\n"
    Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
