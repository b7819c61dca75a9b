"""Rung 9 of the tensor-core ladder, 09_any_k.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung, needs
from gemmlab.kernels.tensor.family import WARPGROUP, reuse_cgma, wgmma_rules
from gemmlab.problems.tensor import BF16_OUT, DTYPES_16, ROW_BYTES

# tc_any_k: 16-byte pieces that cover a 128-byte slice of a row starting anywhere.
RAW_ROW_BYTES = 9 * 16


def _any_k_bytes(c: Config) -> int:
    """Two swizzled tiles of (BM + BN) rows of 128 bytes, then STAGES raw stages of 144-byte rows."""
    rows = c["BM"] + c["BN"]
    return 2 * rows * ROW_BYTES + c["STAGES"] * rows * RAW_ROW_BYTES


# A candidate: written after the newest stored benchmark of its ladder, so outside the catalogue
# until the change that stores a benchmark measuring it (see the ladder's spec.py).
CANDIDATE = True
RUNG = Rung(
    id="tc_any_k",
    source="09_any_k.cu",
    summary="sm_90a: wgmma from tiles the threads shift into place from 16-byte cp.async pieces; any K "
    "(odd too), float32 or bfloat16 C",
    dtypes=(*DTYPES_16, BF16_OUT),
    default=Config(BM=128, BN=128, STAGES=3),
    search=(Config(STAGES=4), Config(BN=256, STAGES=2), Config(BM=64, STAGES=4), Config(BM=192, STAGES=2)),
    threads=lambda c: c["BM"] // 64 * WARPGROUP,
    smem_bytes=_any_k_bytes,
    sass=("HGMMA", "LDGSTS"),
    rules=lambda c: wgmma_rules(c) + needs(c["STAGES"] >= 2, "STAGES must be at least 2"),
    cgma=reuse_cgma,
    min_cc=(9, 0),
    archs=("sm_90a",),
    dynamic_smem=True,
    # Last in every class: the one rung that takes an odd K (or a bfloat16 C whose rows are not
    # whole 16 bytes) at tensor-core speed.
    serves={"skinny-m": 6, "skinny-n": 6, "k-heavy": 5, "few-tiles": 7, "large": 6},
    default_for={"bfloat16": 3, "bfloat16-out": 2},
)
