"""Rung 5 of the FP32 ladder, 05_vectorized.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.sgemm.family import vector_rung

RUNG = vector_rung(
    "sgemm_vectorized",
    "05_vectorized.cu",
    "2-D block tile with float4 loads and stores; A tile stored transposed",
    swizzled=False,
)
