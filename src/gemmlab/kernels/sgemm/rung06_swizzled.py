"""Rung 6 of the FP32 ladder, 06_swizzled.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.sgemm.family import vector_rung

RUNG = vector_rung(
    "sgemm_swizzled",
    "06_swizzled.cu",
    "sgemm_vectorized with an XOR-swizzled A tile and split B fragments: no bank conflicts",
    swizzled=True,
)
