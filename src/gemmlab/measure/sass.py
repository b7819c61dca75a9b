"""What a cubin really contains: its SASS, disassembled with cuobjdump (from
a CUDA toolkit or the nvidia-cuda-cuobjdump wheel; no GPU needed).

The harness uses it to check that a kernel runs the instructions it claims
(``KernelSpec.sass``: HMMA for mma.sync and WMMA, HGMMA for wgmma, UTMALDG
for TMA loads) and that the FP32 ladder holds no tensor-core instruction.
"""

from __future__ import annotations

import collections
import glob
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile

from gemmlab.core.errors import GemmlabError

# A SASS line: "/*0a70*/   @!P0 FFMA R1, R2, R3, R4 ;". Lines predicated on !PT never run.
# The opcode keeps all its modifiers, shapes' lower-case x included
# (QGMMA.64x128x32.F32.E5M2.E5M2), so the formats it multiplies can be read.
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?P<pred>@!?U?P\w+\s+)?(?P<op>[A-Z][A-Za-z0-9_.]*)")


def find_tool(name: str) -> str | None:
    """A CUDA binary on PATH, in /usr/local/cuda, or in an nvidia-* wheel."""
    found = shutil.which(name)
    if found:
        return found
    roots = ["/usr/local/cuda/bin", sysconfig.get_paths()["purelib"] + "/nvidia/*/bin"]
    for root in roots:
        for candidate in glob.glob(os.path.join(root, name)):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def sass_opcodes(cubin: bytes) -> collections.Counter:
    """Static opcode counts of a cubin's SASS (every instruction once, run or not)."""
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise GemmlabError(
            "cuobjdump was not found (PATH, /usr/local/cuda/bin, nvidia wheels), so the SASS cannot be read.",
            "Install the CUDA toolkit or `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`.",
        )
    env = dict(os.environ)
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm:  # cuobjdump calls nvdisasm to print SASS
        env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([cuobjdump, "--dump-sass", f.name], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise GemmlabError(f"cuobjdump could not read the cubin: {out.stderr.strip()}", "Check the CUDA tools.")
    return opcodes_of(out.stdout)


def opcodes_of(sass: str) -> collections.Counter:
    """Opcode counts of cuobjdump's SASS text, each opcode with its modifiers; lines on @!PT left out."""
    ops: collections.Counter = collections.Counter()
    for line in sass.splitlines():
        m = _SASS_LINE.match(line)
        if m and (m["pred"] or "").strip() != "@!PT":
            ops[m["op"]] += 1
    return ops


def total(ops: collections.Counter, base: str) -> int:
    """Instructions whose opcode is ``base`` with any modifiers (HGMMA.64x256x16...)."""
    return sum(v for k, v in ops.items() if k.split(".")[0] == base)


def tensor_core_ops(ops: collections.Counter) -> dict[str, int]:
    """Tensor-core instructions end in MMA (HMMA, HGMMA, IMMA, DMMA, ...);
    HFMA2.MMA is a plain move idiom and is not one of them."""
    return {k: v for k, v in ops.items() if k.split(".")[0].endswith("MMA")}


def missing_claims(claimed: tuple[str, ...], ops: collections.Counter) -> list[str]:
    """The claimed opcodes (base names) that do not occur in ``ops``."""
    return [name for name in claimed if total(ops, name) == 0]
