"""Where the dispatcher's picks lose to cuBLAS: Nsight Compute on both sides.

For each case (a type, a shape and the rung and configuration the tuner
picked there), the pick and the library's call are bound to the same inputs
(gemmlab.measure.run.bound: verified once), warmed up, and then launched
once each inside a profiler range of its own, so that ncu
(--profile-from-start off) sees exactly one call of each: every kernel the
library launches for it (a split-K GEMM and its reduction alike) and ours.
A marker kernel named after the case opens each range, so the rows of ncu's
CSV are split by case and side without guessing from kernel names.

The counters (clocks left alone, and caches too: --cache-control none, so
that each side meets L2 as its warm-up calls left it, as in the timed runs
of the dispatcher, which do not flush it): duration, SM clock, how much of
the elapsed time the average and the busiest SM were active, issue slots
busy, warp instructions, cycles between a warp's issues and every stall
reason's share of them, achieved occupancy, the FMA and tensor pipes' busy
shares, L2 and DRAM throughput, L2 hit rate and bytes, and the launch
(grid, block, registers). A counter that this ncu does not list is left out
(`ncu --query-metrics`), so one missing name does not cost the whole run.

The report puts the two sides next to each other per case, and under them
the differences that account for the time: how much longer the kernel ran,
whether its SMs were idle longer (fill and tail) or busy but issuing less,
and the stall reasons whose total cycles (cycles per issue x instructions)
grew most. Usage, on a GPU machine with ncu on PATH:

    PYTHONPATH=src python3 benchmarks/scripts/gap_profile.py OUT.txt \\
        --from benchmarks/results/2026-11-24o_h100_dispatch-full-fp32-final.json --below 90 \\
        [--from ...json --below 95] [--case float32:128x4096x4096:sgemm_cluster_split_k:'{"SPLITS": 2}'] [--limit N]

--from takes a dispatch_bench.py JSON and keeps the results under --below
percent of cuBLAS (the --below given after it, else 90 for float32 and 95
otherwise); --case adds one by hand (a configuration is applied over the
rung's default). Cases that repeat (same type, shape, rung, configuration)
are profiled once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.core.errors import GemmlabError
from gemmlab.measure.ncu.command import find_ncu, ncu_environment
from gemmlab.measure.ncu.parse import ncu_failure, parse_raw_csv

ROOT = Path(__file__).resolve().parents[2]

METRICS = (
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.avg",
    "sm__cycles_active.avg",
    "sm__cycles_active.max",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "smsp__average_warps_active_per_issue_active.ratio",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "lts__t_bytes.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
)
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active$")
# The reasons ncu 2023-2025 lists on sm_90, used when --query-metrics gives nothing.
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
    "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
    "short_scoreboard", "sleeping", "tex_throttle", "wait",
)  # fmt: skip
MARKER = "gap_case_"


@dataclass(frozen=True)
class Case:
    dtype: str
    m: int
    n: int
    k: int
    rung: str
    config: tuple  # sorted (name, value) pairs
    share: float | None = field(default=None, compare=False)
    source: str = field(default="", compare=False)

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    def title(self) -> str:
        config = json.dumps(dict(self.config), separators=(",", ":"))
        where = f" ({self.share:.1f}% of cuBLAS in {self.source})" if self.share is not None else ""
        return f"{self.dtype} {self.shape}: {self.rung} {config}{where}"


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


def cases_from_file(path: str, below: float | None) -> list[Case]:
    """The results of one dispatch_bench.py JSON under its threshold."""
    data = json.loads(Path(path).read_text())
    found = []
    for r in data["results"]:
        limit = below if below is not None else (90.0 if r["dtype"] == "float32" else 95.0)
        if r.get("share") is None or r["share"] >= limit:
            continue
        found.append(Case(r["dtype"], r["m"], r["n"], r["k"], r["kernel"], tuple(sorted(r["config"].items())),
                          r["share"], Path(path).name))  # fmt: skip
    return found


def case_from_text(text: str) -> Case:
    """dtype:MxNxK:rung[:config-json]."""
    parts = text.split(":", 3)
    if len(parts) < 3:
        raise SystemExit(f"--case {text!r}: give dtype:MxNxK:rung[:JSON]")
    sizes = [int(s) for s in parts[1].lower().split("x")]
    m, n, k = sizes if len(sizes) == 3 else sizes * 3
    config = json.loads(parts[3]) if len(parts) == 4 else {}
    return Case(parts[0], m, n, k, parts[2], tuple(sorted(config.items())))


def unique(cases: list[Case]) -> list[Case]:
    seen, kept = set(), []
    for c in cases:
        if c not in seen:
            seen.add(c)
            kept.append(c)
    return kept


# --- inside ncu: the driver ---------------------------------------------------


def drive(cases: list[Case], side: str) -> int:
    """Launch each case's pick (side 'ours') or library call ('library') once in a profiler range."""
    import cupy as cp

    from gemmlab.core.shapes import Shape
    from gemmlab.kernels import catalogue
    from gemmlab.measure.run import bound

    for index, case in enumerate(cases):
        spec = catalogue.variant(case.rung, dict(case.config))
        marker = cp.ElementwiseKernel("", "raw int32 x", "x[i] = i", f"{MARKER}{index}")
        scratch = cp.zeros(1, cp.int32)
        try:
            with bound(spec.id, Shape(case.m, case.n, case.k), case.dtype, spec=spec) as (launch, library, stream):
                if library is None:
                    print(f"case {index}: no library call for {case.title()}", file=sys.stderr)
                    continue
                call = launch if side == "ours" else library
                for _ in range(3):
                    call()
                stream.synchronize()
                cp.cuda.profiler.start()
                marker(scratch, size=1, stream=stream)
                call()
                stream.synchronize()
                cp.cuda.profiler.stop()
                print(f"case {index}: {side} profiled", file=sys.stderr, flush=True)
        except Exception as exc:  # one case that cannot run is reported, the rest go on
            print(f"case {index}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 0


# --- outside: ncu, the CSV, the report ------------------------------------------


def available_metrics(ncu: str) -> tuple[list[str], list[str]]:
    """METRICS and the stall reasons this ncu lists for the device (all of them if it lists nothing)."""
    try:
        listed = subprocess.run([ncu, "--query-metrics", "--csv"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        listed = ""
    names = set(re.findall(r"^\"?([a-z0-9_]+__[a-z0-9_]+)", listed, re.MULTILINE))
    if not names:
        return list(METRICS), [stall_metric(r) for r in STALL_REASONS]
    metrics = [m for m in METRICS if m.split(".")[0] in names]
    stalls = sorted(stall_metric(STALL.match(n).group(1)) for n in names if STALL.match(n))
    return metrics, stalls


def split_by_case(kernels: list[dict[str, str]]) -> dict[int, list[dict[str, str]]]:
    """Each marker kernel opens its case's kernels; rows before the first marker are dropped."""
    by_case: dict[int, list[dict[str, str]]] = {}
    current = None
    for row in kernels:
        name = row.get("Kernel Name", "")
        if name.startswith(MARKER):
            current = int(name[len(MARKER) :].split("(")[0])
            by_case[current] = []
        elif current is not None:
            by_case[current].append(row)
    return by_case


def number(row: dict[str, str], metric: str) -> float | None:
    text = row.get(metric, "").replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def side_summary(rows: list[dict[str, str]], stalls: list[str]) -> dict:
    """The call's total time, its main (longest) kernel's counters, and the other kernels by name."""
    if not rows:
        return {}
    times = [(number(r, "gpu__time_duration.sum") or 0.0, r) for r in rows]
    total_ns = sum(t for t, _ in times)
    main_ns, main = max(times, key=lambda tr: tr[0])
    out = {"total_us": total_ns / 1e3, "main_us": main_ns / 1e3, "name": main.get("Kernel Name", "?"),
           "others": [(r.get("Kernel Name", "?"), t / 1e3) for t, r in times if r is not main]}  # fmt: skip
    for metric in METRICS:
        out[metric] = number(main, metric)
    inst = out.get("smsp__inst_executed.sum") or 0.0
    out["stalls"] = {}
    for metric in stalls:
        ratio = number(main, metric)
        if ratio is not None:
            reason = metric.removeprefix("smsp__average_warps_issue_stalled_").removesuffix("_per_issue_active.ratio")
            out["stalls"][reason] = (ratio, ratio * inst)
    elapsed, active = out.get("sm__cycles_elapsed.avg"), out.get("sm__cycles_active.avg")
    out["sm_active_pct"] = 100 * active / elapsed if elapsed and active is not None else None
    busiest = out.get("sm__cycles_active.max")
    out["busiest_active_pct"] = 100 * busiest / elapsed if elapsed and busiest is not None else None
    return out


ROWS = (
    ("call, us", "total_us", "{:.1f}"),
    ("main kernel, us", "main_us", "{:.1f}"),
    ("SM clock, MHz", "sm__cycles_elapsed.avg.per_second", "{:.0f}", 1e-6),
    ("SMs active, average % of elapsed", "sm_active_pct", "{:.1f}"),
    ("busiest SM active, % of elapsed", "busiest_active_pct", "{:.1f}"),
    ("issue slots busy, % of active", "smsp__issue_active.avg.pct_of_peak_sustained_active", "{:.1f}"),
    ("warp instructions, M", "smsp__inst_executed.sum", "{:.2f}", 1e-6),
    ("cycles between a warp's issues", "smsp__average_warps_active_per_issue_active.ratio", "{:.2f}"),
    ("achieved occupancy, %", "sm__warps_active.avg.pct_of_peak_sustained_active", "{:.1f}"),
    ("FMA pipe busy, % of active", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "{:.1f}"),
    ("tensor pipe busy, % of elapsed", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "{:.1f}"),
    ("L2 throughput, % of peak", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "{:.1f}"),
    ("L2 hit rate, %", "lts__t_sector_hit_rate.pct", "{:.1f}"),
    ("L2 bytes, MB", "lts__t_bytes.sum", "{:.1f}", 1e-6),
    ("DRAM throughput, % of peak", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "{:.1f}"),
    ("DRAM read, MB", "dram__bytes_read.sum", "{:.1f}", 1e-6),
    ("grid", "launch__grid_size", "{:.0f}"),
    ("block", "launch__block_size", "{:.0f}"),
    ("registers", "launch__registers_per_thread", "{:.0f}"),
)


def cell(summary: dict, key: str, fmt: str, scale: float = 1.0) -> str:
    value = summary.get(key)
    return "-" if value is None else fmt.format(value * scale)


def findings(ours: dict, lib: dict) -> list[str]:
    """The differences that account for the extra time, largest first."""
    if not ours or not lib:
        return ["one side has no profile: nothing to compare"]
    lines = [f"ours takes {ours['total_us'] / lib['total_us']:.2f}x the library's time under ncu "
             f"({ours['total_us']:.1f} against {lib['total_us']:.1f} us)"]  # fmt: skip
    oa, la = ours.get("sm_active_pct"), lib.get("sm_active_pct")
    if oa is not None and la is not None:
        why = "idle SMs (fill, tail or a last block waited on) weigh" if oa < la - 3 else "fill is not the gap"
        lines.append(f"SMs active {oa:.1f}% of the kernel against {la:.1f}%: {why}")
    oi, li = (
        ours.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
        lib.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
    )
    on, ln = ours.get("smsp__inst_executed.sum"), lib.get("smsp__inst_executed.sum")
    if None not in (oi, li, on, ln) and ln:
        lines.append(
            f"while active: issue slots {oi:.1f}% against {li:.1f}%; instructions {on / ln:.2f}x the library's"
        )
    growth = []
    for reason, (_ratio, total) in ours.get("stalls", {}).items():
        theirs = lib.get("stalls", {}).get(reason, (0.0, 0.0))[1]
        growth.append((total - theirs, reason, total, theirs))
    growth.sort(reverse=True)
    top = [g for g in growth if g[0] > 0][:3]
    if top:
        lines.append("stall cycles grown most (warp-cycles, ours against the library's): "
                     + "; ".join(f"{r} {t / 1e6:.1f} M against {b / 1e6:.1f} M" for _, r, t, b in top))  # fmt: skip
    return lines


def report(cases: list[Case], ours: dict[int, list], lib: dict[int, list], stalls: list[str], header: str) -> str:
    out = [header]
    for index, case in enumerate(cases):
        o, b = side_summary(ours.get(index, []), stalls), side_summary(lib.get(index, []), stalls)
        out += ["", f"## {case.title()}"]
        if not o and not b:
            out.append("not profiled (see the driver's messages)")
            continue
        out.append(f"ours:    {o.get('name', '-')[:150]}")
        out.append(f"library: {b.get('name', '-')[:150]}")
        for name, us in b.get("others", []):
            out.append(f"         + {name[:150]} ({us:.1f} us)")
        for name, us in o.get("others", []):
            out.append(f"  ours also ran {name[:150]} ({us:.1f} us)")
        out.append(f"{'':36s} {'ours':>12s} {'library':>12s}")
        for label, key, fmt, *scale in ROWS:
            out.append(f"{label:36s} {cell(o, key, fmt, *scale):>12s} {cell(b, key, fmt, *scale):>12s}")
        reasons = sorted(set(o.get("stalls", {})) | set(b.get("stalls", {})))
        for reason in reasons:
            ro = o.get("stalls", {}).get(reason, (None, 0))[0]
            rb = b.get("stalls", {}).get(reason, (None, 0))[0]
            if max(ro or 0, rb or 0) >= 0.05:
                so = "-" if ro is None else f"{ro:.2f}"
                sb = "-" if rb is None else f"{rb:.2f}"
                out.append(f"{'stall ' + reason + ', cycles/issue':36s} {so:>12s} {sb:>12s}")
        out += ["  - " + line for line in findings(o, b)]
    return "\n".join(out) + "\n"


def profile(ncu: str, cases_path: Path, side: str, metrics: list[str]) -> tuple[str, str]:
    """One side's profile (ncu's raw CSV, the driver's messages); ProfilerError where ncu failed."""
    command = [ncu, "--clock-control", "none", "--cache-control", "none", "--profile-from-start", "off",
               "--metrics", ",".join(metrics),
               "--csv", "--page", "raw", "--print-units", "base",
               sys.executable, __file__, "--drive", side, "--cases-file", str(cases_path)]  # fmt: skip
    env = ncu_environment() | {"PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    failure = ncu_failure(done.stdout + done.stderr, done.returncode)
    if failure is not None:
        raise failure
    return done.stdout, done.stderr


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", nargs="?")
    p.add_argument("--from", dest="sources", action="append", default=[])
    p.add_argument("--below", action="append", type=float, default=[])
    p.add_argument("--case", action="append", default=[])
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--drive", choices=("ours", "library"))
    p.add_argument("--cases-file")
    a = p.parse_args(argv)
    if a.drive:
        data = json.loads(Path(a.cases_file).read_text())
        return drive(
            [Case(c["dtype"], c["m"], c["n"], c["k"], c["rung"], tuple(map(tuple, c["config"]))) for c in data], a.drive
        )
    if not a.out:
        p.error("give OUT.txt")
    cases: list[Case] = []
    for i, source in enumerate(a.sources):
        cases += cases_from_file(source, a.below[i] if i < len(a.below) else None)
    cases = unique(cases + [case_from_text(t) for t in a.case])
    if a.limit:
        cases = cases[: a.limit]
    if not cases:
        p.error("no cases: give --from FILE (with --below) or --case")
    cases_path = Path(a.out).with_suffix(".cases.json")
    cases_path.write_text(
        json.dumps([dict(dtype=c.dtype, m=c.m, n=c.n, k=c.k, rung=c.rung, config=c.config) for c in cases])
    )
    sides = {}
    try:
        ncu = find_ncu()
        metrics, stalls = available_metrics(ncu)
        for side in ("ours", "library"):
            stdout, stderr = profile(ncu, cases_path, side, metrics + stalls)
            Path(a.out).with_suffix(f".{side}.csv").write_text(stdout)
            Path(a.out).with_suffix(f".{side}.log").write_text(stderr)
            sides[side] = split_by_case(parse_raw_csv(stdout).launches)
    except GemmlabError as exc:
        print(f"gap_profile.py: {exc}", file=sys.stderr)
        return 2
    device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    header = (f"# gap_profile.py: the dispatcher's picks against cuBLAS under Nsight Compute "
              f"(--clock-control none --cache-control none), "
              f"{device}, tree {os.environ.get('GEMMLAB_GIT_REVISION', '?')}")  # fmt: skip
    text = report(cases, sides["ours"], sides["library"], stalls, header)
    Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
