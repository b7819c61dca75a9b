"""Rung 11 against rung 9 and cuBLAS, in one run (about 2 minutes on an H200).

For sgemm_multistage (its default configuration) and every configuration of
sgemm_large_tile (gemmlab.kernels.sgemm.spec.configs): verify against float64 at
127 x 129 x 131 and 1000^3, then time at N = 4096, 8192 and 4097 beside cuBLAS
in the same run (gemmlab.measure.run.run with spec=variant(...): 20 repetitions, the
result checked after the first launch and after the timed ones). Every entry
runs in a process of its own, so a kernel that faults cannot take the others
down; all are compiled beforehand, in parallel, by this machine's NVRTC, whose
ptxas resources (registers, spills) and static SASS counts are reported too.
Usage, on a GPU machine:

    PYTHONPATH=src python3 benchmarks/scripts/sgemm_next.py OUT.json [--sanitize]

--sanitize: then compute-sanitizer memcheck and racecheck over every
sgemm_large_tile configuration at three small shapes (one process per tool).
OUT.json holds {"device", "nvrtc", "entries": [{"kernel", "config", "label",
"resources", "dynamic_smem", "sass", "verified", "results": [RunResult.to_dict()],
"errors"}], "sanitizer"}; a compact table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

from gemmlab.backends.nvrtc import compile_kernel, nvrtc_version
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.catalogue import point
from gemmlab.kernels.sgemm import spec as sgemm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgemm_bench import find_tool, sass_opcodes, sass_summary

BASE = "sgemm_multistage"
NEXT = "sgemm_large_tile"
VERIFY_SHAPES = (Shape(127, 129, 131), Shape.square(1000))
TIME_SHAPES = (Shape.square(4096), Shape.square(8192), Shape.square(4097))
# K = 40: three tiles of 16 (the last partial), fewer than the deepest ring.
SANITIZE_SHAPES = (Shape(127, 129, 131), Shape(256, 256, 40), Shape(37, 53, 29))
REPS = 20
ENTRY_TIMEOUT_S = 150


def entries() -> list[tuple[str, dict]]:
    return [(BASE, sgemm.LADDER.rung(BASE).config())] + [(NEXT, c) for c in catalogue.configs(NEXT)]


def label(kernel: str, config: dict) -> str:
    short = "multistage" if kernel == BASE else "large_tile"
    c = config
    return f"{short} {c['BM']}x{c['BN']}x{c['BK']} w{c['WM']}x{c['WN']} s{c['STAGES']}"


def _shape_text(s: Shape) -> str:
    return str(s.m) if s.is_square else f"{s.m}x{s.n}x{s.k}"


# --- the child: one kernel configuration, in its own process ----------------


def child(kernel: str, config: dict, out: str) -> int:
    from gemmlab.measure.run import run

    spec = catalogue.variant(kernel, config)
    record: dict = {"verified": [], "results": [], "errors": []}

    def save() -> None:
        with open(out, "w") as fh:
            json.dump(record, fh, default=list)

    for shape in VERIFY_SHAPES:
        try:
            r = run(kernel, shape, spec=spec, reps=1, warmup=1, baseline=False)
            record["verified"].append({"shape": _shape_text(shape), "error": r.error})
        except GemmlabError as exc:
            record["errors"].append(f"verify {_shape_text(shape)}: {exc}")
            save()
            return 1
        save()
    for shape in TIME_SHAPES:
        try:
            r = run(kernel, shape, spec=spec, reps=REPS, max_seconds=5)
            record["results"].append(r.to_dict())
        except GemmlabError as exc:
            record["errors"].append(f"time {_shape_text(shape)}: {exc}")
        save()
    return 0


def sanitize_child(jobs: list[list]) -> int:
    from gemmlab.measure.run import run

    for kernel, config in jobs:
        spec = catalogue.variant(kernel, config)
        for shape in SANITIZE_SHAPES:
            run(kernel, shape, spec=spec, reps=1, warmup=1, baseline=False)
            print(f"ran {label(kernel, config)} at {_shape_text(shape)}", flush=True)
    return 0


# --- the parent ------------------------------------------------------------------


def compile_all(arch: str) -> list[dict]:
    cuobjdump = find_tool("cuobjdump")

    def build(job: tuple[str, dict]) -> dict:
        kernel, config = job
        spec = catalogue.variant(kernel, config)
        found = {"kernel": kernel, "config": config, "label": label(kernel, config),
                 "dynamic_smem": point(kernel, TIME_SHAPES[0], spec=spec).dynamic_smem,
                 "verified": [], "results": [], "errors": []}  # fmt: skip
        try:
            compiled = compile_kernel(spec, 0, "float32", arch)
        except GemmlabError as exc:
            found["errors"].append(f"compile: {exc}")
            return found
        found["resources"] = asdict(compiled.resources)
        if cuobjdump:
            s = sass_summary(sass_opcodes(compiled.cubin, cuobjdump))
            found["sass"] = {k: s[k] for k in ("ffma", "lds", "ldg", "ldgsts", "stg", "bar", "tensor_core")}
        return found

    jobs = entries()
    first = build(jobs[0])  # imports cuda.core once: a first import from several threads at once can fail
    with ThreadPoolExecutor(8) as pool:
        return [first, *pool.map(build, jobs[1:])]


def run_entry(entry: dict) -> None:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        part = fh.name
    cmd = [sys.executable, os.path.abspath(__file__), "--child", entry["kernel"], json.dumps(entry["config"]), part]
    crash = None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=ENTRY_TIMEOUT_S)
        if proc.returncode != 0:
            crash = f"child exited {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"
    except subprocess.TimeoutExpired:
        crash = f"child timed out after {ENTRY_TIMEOUT_S} s"
    got = {"verified": [], "results": [], "errors": []}
    if os.path.getsize(part):
        with open(part) as fh:
            got = json.load(fh)
    os.unlink(part)
    entry["verified"], entry["results"] = got["verified"], got["results"]
    # A child that failed by itself said why; one that crashed or hung did not.
    entry["errors"] += got["errors"] or ([crash] if crash else [])


def sanitize(jobs: list[list]) -> dict:
    from gemmlab.measure.sanitize import find_sanitizer, parse_summary

    found = {}
    for tool in ("memcheck", "racecheck"):
        cmd = [find_sanitizer(), "--tool", tool, "--print-limit", "20", "--report-api-errors", "no"]
        if tool == "racecheck":
            cmd += ["--racecheck-report", "all"]
        cmd += [sys.executable, os.path.abspath(__file__), "--sanitize-child", json.dumps(jobs)]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        output = proc.stdout + proc.stderr
        errors = parse_summary(tool, output)
        if proc.returncode != 0 and errors == 0:
            errors = -1
        keep = [line for line in output.splitlines() if "=========" in line and "Host Frame" not in line]
        found[tool] = {"errors": errors, "seconds": time.monotonic() - start, "lines": keep[:60]}
        verdict = "clean" if errors == 0 else f"{errors} errors"
        print(f"compute-sanitizer {tool}: {verdict} ({len(jobs)} configurations x {len(SANITIZE_SHAPES)} shapes, "
              f"{found[tool]['seconds']:.0f} s)")  # fmt: skip
        for line in keep[:20] if errors else []:
            print("   ", line)
    return found


def print_table(done: list[dict]) -> None:
    shapes = [_shape_text(s) for s in TIME_SHAPES]
    cublas = {}
    for e in done:
        for r in e["results"]:
            if r.get("baseline_gflops"):
                cublas.setdefault(_shape_text(Shape(r["m"], r["n"], r["k"])), []).append(r["baseline_gflops"])
    head = f"{'configuration':38s} {'regs':>4s} {'spill':>5s} {'dyn KB':>6s} {'verified':>8s}"
    print("\n" + head + "".join(f" {s:>15s}" for s in shapes))
    line = f"{'cuBLAS (median over rows)':38s} {'':>4s} {'':>5s} {'':>6s} {'':>8s}"
    for s in shapes:
        got = sorted(cublas.get(s, []))
        line += f" {got[len(got) // 2] / 1e3:15.1f}" if got else f" {'':>15s}"
    print(line)
    for e in done:
        res = e.get("resources") or {}
        spill = res.get("spill_store_bytes", 0) + res.get("spill_load_bytes", 0) if res else "-"
        ok = "yes" if len(e["verified"]) == len(VERIFY_SHAPES) else "NO"
        row = f"{e['label']:38s} {res.get('registers', '-'):>4} {spill:>5} {e['dynamic_smem'] / 1024:6.0f} {ok:>8s}"
        cell = {_shape_text(Shape(r["m"], r["n"], r["k"])): r for r in e["results"]}
        for s in shapes:
            r = cell.get(s)
            ratio = f"({r['ratio_to_baseline']:4.0%})" if r and r.get("ratio_to_baseline") else ""
            row += f" {r['gflops'] / 1e3:7.1f} {ratio:>7s}" if r else f" {'-':>15s}"
        print(row)
        for err in e["errors"]:
            print(f"    ! {err.splitlines()[0][:300]}")
    print("(TFLOP/s at N = " + ", ".join(shapes) + "; in brackets: of cuBLAS timed in the same run)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="JSON file to write")
    parser.add_argument("--sanitize", action="store_true", help="also compute-sanitizer memcheck and racecheck")
    parser.add_argument("--child", nargs=3, metavar=("KERNEL", "CONFIG", "PART"), help=argparse.SUPPRESS)
    parser.add_argument("--sanitize-child", metavar="JOBS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kernel, config, part = args.child
        return child(kernel, json.loads(config), part)
    if args.sanitize_child:
        return sanitize_child(json.loads(args.sanitize_child))
    if not args.out:
        parser.error("OUT.json is required")

    start = time.monotonic()
    info = gpu.describe(0)
    print(f"{info.name} ({info.arch}), {info.sm_count} SMs, NVRTC {nvrtc_version()}; "
          f"{len(entries())} kernels, each in its own process", flush=True)  # fmt: skip
    done = compile_all(info.arch)
    print(f"compiled in {time.monotonic() - start:.0f} s", flush=True)
    for e in done:
        t0 = time.monotonic()
        if not e["errors"]:
            run_entry(e)
        best = ", ".join(f"{r['n']}: {r['gflops'] / 1e3:.1f}" for r in e["results"])
        print(f"  {e['label']:38s} {time.monotonic() - t0:5.1f} s  {best or 'no timing'}"
              f"{'  (' + str(len(e['errors'])) + ' errors)' if e['errors'] else ''}", flush=True)  # fmt: skip
    print_table(done)
    record = {"device": info.to_dict(), "nvrtc": nvrtc_version(), "entries": done, "sanitizer": None}

    def save() -> None:
        with open(args.out, "w") as fh:
            json.dump(record, fh, indent=1, default=list)
        print(f"wrote {args.out} ({time.monotonic() - start:.0f} s)", flush=True)

    save()
    sanitizer = None
    if args.sanitize:
        try:
            sanitizer = sanitize([[NEXT, c] for c in catalogue.configs(NEXT)])
        except (GemmlabError, subprocess.TimeoutExpired) as exc:
            print(f"compute-sanitizer did not run: {exc}", file=sys.stderr)
            sanitizer = {"error": {"errors": -1, "lines": [str(exc)]}}
        record["sanitizer"] = sanitizer
        save()
    bad = any(e["errors"] or len(e["verified"]) < len(VERIFY_SHAPES) for e in done)
    bad = bad or bool(sanitizer and any(t["errors"] for t in sanitizer.values()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
