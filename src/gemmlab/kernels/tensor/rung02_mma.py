"""Rung 2 of the tensor-core ladder, 02_mma.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.tensor.family import ROWS_16, reuse_cgma, warp_rules, warp_threads
from gemmlab.problems.tensor import DTYPES_16

RUNG = Rung(
    id="tc_mma",
    source="02_mma.cu",
    summary="mma.sync m16n8k16 fed by ldmatrix.x4 from 128-byte-swizzled tiles; 16-byte loads",
    dtypes=DTYPES_16,
    default=Config(BM=128, BN=128, WM=64, WN=32),
    search=(Config(WM=32, WN=64), Config(BM=64, WM=32, WN=32), Config(BN=64, WM=32, WN=32)),
    threads=warp_threads,
    smem_bytes=lambda c: 0,
    sass=("HMMA", "LDSM"),
    min_cc=(8, 0),  # mma.sync with bf16, cp.async
    rules=warp_rules,
    cgma=reuse_cgma,
    k_bytes_multiple=ROWS_16,
)
