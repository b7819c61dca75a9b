"""Rung 1 of the FP32 ladder, 01_coalesced.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.ladder import Config, Rung
from gemmlab.kernels.sgemm.family import MAX_ACCUMULATORS

RUNG = Rung(
    id="sgemm_coalesced",
    source="01_coalesced.cu",
    summary="one output per thread, threadIdx.x along a row of C (coalesced B and C), any size",
    default=Config(BX=32, BY=32),
    choices={"BX": (32,), "BY": (8, 16, 32)},
    threads=lambda c: c["BX"] * c["BY"],
    tile=lambda c: (c["BY"], c["BX"]),
    block=lambda c: (c["BX"], c["BY"], 1),
    outputs=lambda c: 1,
    fragments=lambda c: 2,
    max_accumulators=MAX_ACCUMULATORS,
    smem_bytes=lambda c: 0,
    cgma=lambda c: 1.0,
)
