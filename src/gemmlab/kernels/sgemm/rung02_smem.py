"""Rung 2 of the FP32 ladder, 02_smem.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.sgemm.family import MAX_ACCUMULATORS

RUNG = Rung(
    id="sgemm_smem",
    source="02_smem.cu",
    summary="TILE x TILE tiles of A and B in shared memory, zero-filled at the edges",
    default=Config(TILE=32),
    choices={"TILE": (16, 32)},
    threads=lambda c: c["TILE"] ** 2,
    tile=lambda c: (c["TILE"], c["TILE"]),
    block=lambda c: (c["TILE"], c["TILE"], 1),
    outputs=lambda c: 1,
    fragments=lambda c: 2,
    max_accumulators=MAX_ACCUMULATORS,
    smem_bytes=lambda c: 2 * 4 * c["TILE"] ** 2,
    cgma=lambda c: float(c["TILE"]),
)
