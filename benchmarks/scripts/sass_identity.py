"""Whether a source change left the FP32 ladder's machine code as it was.

Compiles every configuration (sgemm.configs) of the rungs named (default:
rungs 11 onward) for each arch given, with no cache, and hashes each cubin's
SASS instruction stream (cuobjdump --dump-sass, addresses left out): the
cubin's other bytes may change with a refactor while not one instruction
does. Run it before and after a change, then compare the two files:

    PYTHONPATH=src python3 benchmarks/scripts/sass_identity.py OUT.json [--arch sm_90 sm_80] [--rungs ...]
    python3 benchmarks/scripts/sass_identity.py --compare BEFORE.json AFTER.json

Needs NVRTC (cuda.core) and cuobjdump, not a GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor

DEFAULT_RUNGS = (
    "sgemm_large_tile",
    "sgemm_lean_loop",
    "sgemm_spread_copies",
    "sgemm_stream_k",
    "sgemm_column_order",
    "sgemm_edge_strips",
    "sgemm_padded_b",
)
_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/")


def sass_hash(job: tuple[str, dict, str]) -> tuple[str, str, int]:
    from gemmlab.backends.nvrtc import compile_kernel
    from gemmlab.kernels.sgemm import spec as sgemm
    from gemmlab.measure.sass import find_tool

    rung_id, config, arch = job
    compiled = compile_kernel(sgemm.variant(rung_id, config), 0, "float32", arch, use_cache=False)
    fd, path = tempfile.mkstemp(suffix=".cubin")
    try:
        os.write(fd, bytes(compiled.cubin))
        os.close(fd)
        dump = subprocess.run([find_tool("cuobjdump"), "--dump-sass", path], capture_output=True, text=True, check=True)
    finally:
        os.unlink(path)
    lines = [_ADDRESS.sub("", line).strip() for line in dump.stdout.splitlines() if _ADDRESS.search(line)]
    key = f"{rung_id} {sorted(config.items())} {arch}"
    return key, hashlib.sha256("\n".join(lines).encode()).hexdigest(), len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="JSON file to write")
    parser.add_argument("--arch", nargs="+", default=["sm_90", "sm_80"])
    parser.add_argument("--rungs", nargs="+", default=list(DEFAULT_RUNGS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.load(open(p)) for p in args.compare)
        keys = before.keys() | after.keys()
        differ = sorted(k for k in keys if before.get(k, [None])[0] != after.get(k, [None])[0])
        print(f"{len(keys) - len(differ)} configurations with the same SASS; {len(differ)} differ")
        for key in differ:
            print(f"  differs: {key}")
        sys.exit(1 if differ else 0)
    if not args.out:
        parser.error("OUT.json is needed unless --compare is given")
    from gemmlab.kernels.sgemm import spec as sgemm

    jobs = [(r, dict(c), a) for r in args.rungs for c in sgemm.configs(r) for a in args.arch]
    with ProcessPoolExecutor(args.jobs) as pool:
        found = {key: [digest, count] for key, digest, count in pool.map(sass_hash, jobs)}
    with open(args.out, "w") as fh:
        json.dump(found, fh, indent=1)
    print(f"{len(found)} configurations hashed into {args.out}")


if __name__ == "__main__":
    main()
