"""The clocks a kernel runs at under sustained load, beside cuBLAS's: each
candidate (configurations of one rung, and cuBLAS on the same inputs) is
launched back to back for a few seconds, in rounds whose order rotates, while
nvidia-smi samples the SM clock, the board's power and the reasons the clock
is held down every 50 ms. Per candidate: microseconds per launch (CUDA events
around the steady part of each window), the median SM clock and power over
it, and their product, cycles per launch, which does not depend on the clock.
Two kernels that take the same cycles but not the same time differ in the
clock the GPU could hold for each (power, heat), not in their schedules.
Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/clock_watch.py OUT.json --rung tc_tma_store
        --configs '[{}, {"BN": 192}]' --shape 3000 --dtype bfloat16 [--seconds 2] [--rounds 3]

OUT.txt: a line per candidate. Nothing here changes a clock or a power limit:
the GPU runs as it was found.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from config_ab import parse_shape

from gemmlab.core import gpu
from gemmlab.kernels import catalogue
from gemmlab.measure.run import bound

QUERY = "timestamp,clocks.sm,power.draw,clocks_event_reasons.active"
SETTLE_S = 0.5  # the start of each window, left out: the clock moves to the new load


def hold(cp, stream, call, seconds: float) -> tuple[float, float, float]:
    """Launch ``call`` back to back for ``seconds``; returns the host times at
    which the steady part began and ended, and the GPU's microseconds per launch over it."""
    with stream:  # the library's call runs on the current stream
        return _hold(cp, stream, call, seconds)


def _hold(cp, stream, call, seconds: float) -> tuple[float, float, float]:
    start = time.time()
    while time.time() - start < SETTLE_S:
        for _ in range(20):
            call()
        stream.synchronize()
    begin, end = cp.cuda.Event(), cp.cuda.Event()
    steady, launches = time.time(), 0
    begin.record(stream)
    while time.time() - start < seconds:
        for _ in range(20):
            call()
        launches += 20
        stream.synchronize()
    end.record(stream)
    end.synchronize()
    return steady, time.time(), cp.cuda.get_elapsed_time(begin, end) * 1e3 / launches


def samples(path: Path) -> list[tuple[float, float, float, str]]:
    """nvidia-smi's lines as (host time, SM MHz, watts, reasons)."""
    found = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            found.append((when, float(parts[1]), float(parts[2]), parts[3]))
        except ValueError:
            continue
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--rung", required=True)
    parser.add_argument("--configs", default="[{}]", help="JSON list of configurations over the rung's default")
    parser.add_argument("--shape", required=True, help="MxNxK, or N for a square")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cp, shape = gpu.cupy(), parse_shape(args.shape)
    configs = json.loads(args.configs)
    log = Path(tempfile.mkstemp(suffix=".csv")[1])
    windows: dict[str, list[tuple[float, float, float]]] = {}
    with contextlib.ExitStack() as stack:
        calls = {}
        for config in configs:
            spec = catalogue.variant(args.rung, config)
            launch, library, stream = stack.enter_context(bound(args.rung, shape, args.dtype, spec=spec))
            calls[args.rung + " " + json.dumps(config)] = (launch, stream)
            if library is not None and "cuBLAS" not in calls:
                calls["cuBLAS"] = (library, stream)
        with log.open("w") as sink:
            command = ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "50"]
            smi = subprocess.Popen(command, stdout=sink)
            try:
                names = list(calls)
                for r in range(args.rounds):
                    for name in names[r % len(names) :] + names[: r % len(names)]:
                        call, stream = calls[name]
                        windows.setdefault(name, []).append(hold(cp, stream, call, args.seconds))
            finally:
                smi.terminate()
                smi.wait()
    seen = samples(log)
    rows = []
    for name, spans in windows.items():
        inside = [s for s in seen if any(a <= s[0] <= b for a, b, _ in spans)]
        mhz = statistics.median(s[1] for s in inside) if inside else None
        watts = statistics.median(s[2] for s in inside) if inside else None
        us = statistics.median(t for _, _, t in spans)
        reasons = sorted({s[3] for s in inside})
        rows.append({"candidate": name, "us": us, "sm_mhz": mhz, "watts": watts, "samples": len(inside),
                     "cycles": us * mhz if mhz else None, "reasons": reasons})  # fmt: skip
    info = gpu.describe(0)
    head = f"{args.rung} at {args.shape} {args.dtype} on {info.name}, {args.rounds} rounds of {args.seconds} s each"
    lines = [head]
    for row in sorted(rows, key=lambda r: r["us"]):
        clock = f"{row['sm_mhz']:6.0f} MHz {row['watts']:6.1f} W {row['cycles']:10.0f} cycles" if row["sm_mhz"] else ""
        lines.append(f"  {row['us']:9.2f} us  {clock}  {row['candidate']}  reasons {','.join(row['reasons'])}")
    args.out.write_text(json.dumps({"head": head, "rows": rows}, indent=1))
    args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
