"""Rung 12 of the FP32 ladder, 12_lean_loop.cu: its configuration, search and launch facts."""

from __future__ import annotations

from gemmlab.kernels.sgemm.rung11_large_tile import large_rung

RUNG = large_rung(
    "sgemm_lean_loop",
    "12_lean_loop.cu",
    "sgemm_large_tile with each thread's copies worked out once: no bounds arithmetic in the main loop",
)
