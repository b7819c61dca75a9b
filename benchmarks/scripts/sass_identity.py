"""Whether a source change left the package's machine code as it was.

Compiles, with no cache, every kernel configuration the package can build for
each arch given, and hashes each cubin's SASS instruction stream (cuobjdump
--dump-sass, addresses left out; the "Function :" headers, which carry mangled
names, are not hashed): the cubin's other bytes may change with a refactor
while not one instruction does. By default it covers

- catalogue: every catalogue kernel at every block edge it lists (edge 0 when
  it has none) and every dtype it takes;
- sgemm: every configuration (sgemm.configs) of every FP32 rung;
- tensor: every configuration (tensor.configs) of every tensor-core rung, for
  each of its dtypes;
- lowp: every configuration of every 8-bit rung (kernels/lowp), for each of
  its dtypes;
- peak: every instruction of every peak-rate family (gemmlab.measure.peak).

The sgemm, tensor and lowp sets take each ladder's candidate rungs
(catalogue.candidate_ids()) as well as its rungs: a candidate is built from
the same headers, and no other set would see it.

A kernel built only for some architectures (sm_90a, a minimum compute
capability) is compiled for the arch its compile_arch gives, and is skipped,
not failed, where that raises DeviceLimitError. Each entry is keyed by kernel
id, dtype, block edge, configuration (or template arguments) and the arch
compiled for: never a module path or a mangled name, so the keys survive a
refactor that moves modules. All gemmlab imports are in _gemmlab(): after such
a refactor, only that function needs editing. Run it before and after a
change, then compare the two files:

    PYTHONPATH=src python3 benchmarks/scripts/sass_identity.py OUT.json [--arch sm_90 sm_80] [--jobs N]
        [--sets catalogue sgemm tensor lowp peak] [--kernels ID ...]
    python3 benchmarks/scripts/sass_identity.py --compare BEFORE.json AFTER.json

Needs NVRTC (cuda.core) and cuobjdump, not a GPU.

Not every compile is repeatable: sgemm_skinny_n at COLS = 16 comes out of
ptxas with the operands of some FFMAs swapped from one compile of the same
source to the next (seen 2026-11-24). Where --compare reports a kernel the
change did not touch, hash the unchanged tree twice and compare those first.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ProcessPoolExecutor, as_completed

SETS = ("catalogue", "sgemm", "tensor", "lowp", "peak")
_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/")


@functools.cache
def _gemmlab() -> types.SimpleNamespace:
    """Every piece of gemmlab this script uses: the one place to edit when modules move."""
    from gemmlab.backends.nvrtc import compile_kernel, compile_source
    from gemmlab.core.errors import DeviceLimitError
    from gemmlab.kernels import catalogue
    from gemmlab.kernels.lowp.spec import LADDER as LOWP
    from gemmlab.kernels.sgemm.spec import LADDER as SGEMM
    from gemmlab.kernels.tensor.spec import LADDER as TENSOR
    from gemmlab.measure import peak
    from gemmlab.measure.sass import find_tool

    return types.SimpleNamespace(
        catalogue=tuple(catalogue.CATALOGUE),  # KernelSpec: id, dtypes, block_edges, config, compile_arch
        get_kernel=catalogue.get,
        # Each ladder's rungs, then its candidate rungs (catalogue.candidate_ids()).
        ladder_rungs={
            "sgemm": tuple(r.id for r in (*SGEMM.rungs, *SGEMM.candidates)),
            "tensor": tuple(r.id for r in (*TENSOR.rungs, *TENSOR.candidates)),
            "lowp": tuple(r.id for r in (*LOWP.rungs, *LOWP.candidates)),
        },
        configs=catalogue.configs,  # (kernel id) -> every configuration, the default first
        variant=catalogue.variant,  # (kernel id, configuration) -> KernelSpec
        peak_families=tuple(peak.FAMILIES),  # Family: id, source, instructions, applies, compile_arch, name_expression
        compile_kernel=compile_kernel,  # (spec, block_edge, dtype, arch, use_cache=) -> .cubin
        compile_source=compile_source,  # (kernel_id, source, expr, arch, use_cache=) -> .cubin
        find_tool=find_tool,
        DeviceLimitError=DeviceLimitError,
    )


def _key(kernel_id: str, dtype: str, edge: int, config: dict | tuple, arch: str) -> str:
    what = f"config={sorted(config.items())}" if isinstance(config, dict) else f"template={tuple(config)}"
    return f"{kernel_id} {dtype} edge={edge} {what} {arch}"


def _cc(arch: str) -> tuple[int, int]:
    digits = arch.removeprefix("sm_").rstrip("af")
    return int(digits[:-1]), int(digits[-1])


def plan(archs: list[str], sets: list[str], kernels: list[str] | None) -> tuple[dict, dict]:
    """(jobs, skipped): jobs maps each key to what a worker needs to rebuild and
    compile it (picklable: ids, dtypes, configurations, arch); skipped maps each
    key that cannot be built for its arch to the reason."""
    g = _gemmlab()
    jobs: dict[str, tuple] = {}
    skipped: dict[str, str] = {}
    wanted = (lambda kid: kid in kernels) if kernels else (lambda kid: True)

    def add(kind: str, spec, kernel_id: str, dtype: str, edge: int, config: dict, arch: str, build) -> None:
        try:
            target = spec.compile_arch(arch)
        except g.DeviceLimitError as exc:
            skipped.setdefault(_key(kernel_id, dtype, edge, config, arch), str(exc).splitlines()[0])
            return
        jobs.setdefault(_key(kernel_id, dtype, edge, config, target), (kind, build, dtype, edge, target))

    for arch in archs:
        if "catalogue" in sets:
            for spec in g.catalogue:
                if not wanted(spec.id):
                    continue
                for edge in spec.block_edges or (0,):
                    for dtype in spec.dtypes:
                        add("spec", spec, spec.id, dtype, edge, spec.config or {}, arch, ("catalogue", spec.id, None))
        for kind, rungs in g.ladder_rungs.items():
            if kind not in sets:
                continue
            for rung_id in rungs:
                if not wanted(rung_id):
                    continue
                for config in g.configs(rung_id):
                    config = dict(config)
                    spec = g.variant(rung_id, config)
                    for dtype in spec.dtypes:
                        add("spec", spec, rung_id, dtype, 0, config, arch, (kind, rung_id, config))
        if "peak" in sets:
            cc = _cc(arch)
            for family in g.peak_families:
                kernel_id = f"peak_{family.id}"
                if not wanted(kernel_id):
                    continue
                for instruction in family.instructions:
                    if not family.applies(cc):
                        skipped[_key(kernel_id, instruction.dtype, 0, family.template, arch)] = (
                            f"{kernel_id} has no instructions for compute capability {cc[0]}.{cc[1]}"
                        )
                        continue
                    target = family.compile_arch(cc)
                    key = _key(kernel_id, instruction.dtype, 0, family.template, target)
                    jobs.setdefault(key, ("peak", ("peak", family.id, None), instruction.dtype, 0, target))
    return jobs, skipped


def _cubin(job: tuple) -> bytes:
    g = _gemmlab()
    kind, (where, kernel_id, config), dtype, edge, arch = job
    if kind == "peak":
        family = next(f for f in g.peak_families if f.id == kernel_id)
        expr = family.name_expression(dtype)
        return g.compile_source(f"peak_{family.id}", family.source, expr, arch, use_cache=False).cubin
    spec = g.get_kernel(kernel_id) if where == "catalogue" else g.variant(kernel_id, config)
    return g.compile_kernel(spec, edge, dtype, arch, use_cache=False).cubin


def sass_hash(item: tuple[str, tuple]) -> tuple[str, str | None, int, str | None]:
    """(key, SHA-256 of the address-free SASS lines, their count, None), or
    (key, None, 0, error) when the kernel did not compile or disassemble."""
    key, job = item
    try:
        cubin = _cubin(job)
        fd, path = tempfile.mkstemp(suffix=".cubin")
        try:
            os.write(fd, bytes(cubin))
            os.close(fd)
            dump = subprocess.run([_gemmlab().find_tool("cuobjdump"), "--dump-sass", path],
                                  capture_output=True, text=True, check=True)  # fmt: skip
        finally:
            os.unlink(path)
    except Exception as exc:  # reported per key, the others go on
        return key, None, 0, f"{type(exc).__name__}: {exc}"
    lines = [_ADDRESS.sub("", line).strip() for line in dump.stdout.splitlines() if _ADDRESS.search(line)]
    if not lines:
        return key, None, 0, "cuobjdump printed no SASS"
    return key, hashlib.sha256("\n".join(lines).encode()).hexdigest(), len(lines), None


def _load(path: str) -> tuple[dict, dict, dict]:
    """(hashes, skipped, failed) of a file; a file of the first form is hashes alone."""
    data = json.load(open(path))
    if "hashes" in data and isinstance(data["hashes"], dict):
        return data["hashes"], data.get("skipped", {}), data.get("failed", {})
    return data, {}, {}


def compare(before_path: str, after_path: str) -> int:
    (before, b_skip, b_fail), (after, a_skip, a_fail) = _load(before_path), _load(after_path)
    both = before.keys() & after.keys()
    differ = sorted(k for k in both if before[k][0] != after[k][0])
    only_before = sorted(before.keys() - after.keys())
    only_after = sorted(after.keys() - before.keys())
    print(f"{len(both) - len(differ)} configurations with the same SASS; {len(differ)} differ; "
          f"{len(only_before)} only in {before_path}; {len(only_after)} only in {after_path}")  # fmt: skip
    for key in differ:
        print(f"  differs: {key}")
    for key in only_before:
        print(f"  only before: {key}" + (f" (after: failed: {a_fail[key]})" if key in a_fail else ""))
    for key in only_after:
        print(f"  only after: {key}")
    skip_changed = sorted(b_skip.keys() ^ a_skip.keys())
    for key in skip_changed:
        print(f"  skipped in {'before' if key in b_skip else 'after'} only: {key}")
    for key in sorted(a_fail.keys() - b_fail.keys()):
        print(f"  fails after only: {key}: {a_fail[key]}")
    return 1 if differ or only_before or only_after or skip_changed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="JSON file to write")
    parser.add_argument("--arch", nargs="+", default=["sm_90", "sm_80"])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS), help="what to cover (default: all)")
    parser.add_argument("--kernels", "--rungs", nargs="+", help="only these kernel ids (peak kernels: peak_<family>)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.out:
        parser.error("OUT.json is needed unless --compare is given")

    start = time.monotonic()
    jobs, skipped = plan(args.arch, args.sets, args.kernels)
    print(f"{len(jobs)} configurations to compile, {len(skipped)} skipped (not built for their arch)", flush=True)
    hashes: dict[str, list] = {}
    failed: dict[str, str] = {}
    # Longest first (tensor and 8-bit rungs, then the FP32 ladder), so no long compile is left for the end.
    order = {"tensor": 0, "lowp": 0, "sgemm": 1, "peak": 2, "catalogue": 3}
    items = sorted(jobs.items(), key=lambda kv: (order[kv[1][1][0]], kv[0]))
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(sass_hash, item) for item in items]
        for done, future in enumerate(as_completed(futures), 1):
            key, digest, count, error = future.result()
            if error is None:
                hashes[key] = [digest, count]
            else:
                failed[key] = error
                print(f"  FAILED {key}: {error.splitlines()[0] if error else ''}", flush=True)
            if done % 25 == 0 or done == len(futures):
                print(f"  {done}/{len(futures)} in {time.monotonic() - start:.0f} s", flush=True)
    result = {
        "format": 2,
        "archs": args.arch,
        "sets": args.sets,
        "hashes": dict(sorted(hashes.items())),
        "skipped": dict(sorted(skipped.items())),
        "failed": dict(sorted(failed.items())),
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"{len(hashes)} configurations hashed into {args.out} in {time.monotonic() - start:.0f} s; "
          f"{len(skipped)} skipped; {len(failed)} failed")  # fmt: skip
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
