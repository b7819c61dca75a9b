"""Where each programming model's GEMM loses time: one Nsight Compute pass per
rung over its warp states, beside gemmlab's own profile of the same launch.

For every KERNEL:DTYPE:N given (peer rungs included: the launch profiled is the
first one the runner times, after the backend's configuration search), this
runs ncu twice on the launch `gemmlab profile` measures:
  1. `gemmlab profile`'s counters (measure/ncu/: time, FLOPs executed,
     the tensor pipe's busy share, occupancy, DRAM traffic, bank conflicts);
  2. the WarpStateStats section (the stall table: cycles per issued
     instruction and where warps wait), with issue-slot and tensor-pipe use.
Clocks are left as they are (--clock-control none). Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/models_profile.py OUT.txt \
        tc_tma_store:bfloat16:4096 triton_tc_tma:bfloat16:4096 ...

OUT.txt holds both, per rung; OUT.json the first as `gemmlab profile --json` gives it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure import ncu

EXTRA = (
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__registers_per_thread",
)
KEEP = re.compile(r"^  \S|^    (smsp|sm__|dram|launch)|Warp Cycles Per|^    Stall ")


def warp_states(kernel_id: str, dtype: str, n: int) -> str:
    """The stall table of the launch `gemmlab profile` measures (text, filtered)."""
    point = catalogue.point(kernel_id, Shape(n, n, n), None, dtype)
    command = ncu.command.ncu_command(ncu.command.find_ncu(), ncu.command.mangled_name(point), point,
                                      skip=ncu.command.launches_to_skip(point))  # fmt: skip
    at = command.index("--metrics")
    command[at : at + 2] = ["--metrics", ",".join(EXTRA), "--section", "WarpStateStats", "--print-details", "all"]
    command.remove("--csv")
    at = command.index("--page")
    command[at : at + 2] = ["--page", "details"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=ncu.command.ncu_environment())
    lines = (proc.stdout + proc.stderr).splitlines()
    kept = [line for line in lines if KEEP.search(line) and not _idle_stall(line)]
    return "\n".join(kept) if kept else "\n".join(lines[-20:])


def _idle_stall(line: str) -> bool:
    """A stall row under 0.01 cycles per instruction says nothing."""
    if "Stall" not in line:
        return False
    try:
        return float(line.split()[-1].replace(",", "")) < 0.01
    except ValueError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("points", nargs="+", help="KERNEL:DTYPE:N")
    args = parser.parse_args()
    text, found = [], {}
    for item in args.points:
        kernel_id, dtype, n = item.split(":")
        text.append(f"=== {kernel_id} {dtype} {n}^3")
        try:
            result = ncu.command.profile_point(kernel_id, Shape(int(n), int(n), int(n)), None, dtype)
            found[item] = result.to_dict()
            text.append(json.dumps(result.to_dict(), indent=1, default=str))
        except GemmlabError as exc:
            found[item] = {"error": str(exc)}
            text.append(f"gemmlab profile: {exc}")
        try:
            text.append(warp_states(kernel_id, dtype, int(n)))
        except (GemmlabError, subprocess.TimeoutExpired) as exc:
            text.append(f"warp states: {exc}")
        print("\n".join(text[-3:]), flush=True)
    args.out.write_text("\n".join(text) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(found, indent=1, default=str))


if __name__ == "__main__":
    main()
