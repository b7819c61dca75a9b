"""The FP32 ladder beyond the documents: SGEMM from a coalesced naive kernel to
a multistage cp.async pipeline, one idea per rung (docs/sgemm-ladder.md).

Every rung computes C = alpha * A.B + beta * C in float32 with FP32 FFMA (no
tensor cores), row-major (A is M x K, B is K x N), for any M, N, K, and takes
the same arguments: ``(a, b, c_in, c_out, m, n, k, alpha, beta)``. The C that
beta scales is a separate, read-only input, so every launch (warm-up, timed,
checked) computes the same output, and the runner's NaN poison in ``c_out``
still catches any output a kernel leaves unwritten.

A rung's tile sizes are template parameters. ``LADDER.kernels`` holds one
catalogue entry per rung at its default configuration, chosen for H100/H200
(sm_90: 132 SMs, 228 KB of shared memory and 64K registers per SM).
``LADDER.configs(kernel_id)`` lists the configurations a rung accepts within
the thread, shared-memory and register limits, and ``LADDER.variant(kernel_id,
config)`` returns the catalogue entry for one of them: what a tuner enumerates
(through gemmlab.kernels.catalogue.configs and variant).

Each rung's configuration, search and launch facts sit in ``rungNN_name.py``
beside its ``NN_name.cu``; what the rungs share is ``family.py``. This module
is the ladder: its rungs in order, then its candidate rungs.
"""

from __future__ import annotations

from gemmlab.kernels.ladder import Ladder, Rung
from gemmlab.kernels.sgemm import (
    rung01_coalesced,
    rung02_smem,
    rung03_1d_blocktile,
    rung04_2d_blocktile,
    rung05_vectorized,
    rung06_swizzled,
    rung07_warptile,
    rung08_double_buffer,
    rung09_multistage,
    rung10_swizzle_l2,
    rung11_large_tile,
    rung12_lean_loop,
    rung13_spread_copies,
    rung14_stream_k,
    rung15_column_order,
    rung16_edge_strips,
    rung17_padded_b,
    rung18_small_tile,
    rung19_split_k,
    rung20_skinny,
    rung21_skinny_n,
    rung22_gemv_split,
    rung23_cluster_split_k,
)
from gemmlab.kernels.sgemm.family import build, limits
from gemmlab.kernels.spec import KernelSpec

RUNGS: tuple[Rung, ...] = (
    rung01_coalesced.RUNG,
    rung02_smem.RUNG,
    rung03_1d_blocktile.RUNG,
    rung04_2d_blocktile.RUNG,
    rung05_vectorized.RUNG,
    rung06_swizzled.RUNG,
    rung07_warptile.RUNG,
    rung08_double_buffer.RUNG,
    rung09_multistage.RUNG,
    rung10_swizzle_l2.RUNG,
    rung11_large_tile.RUNG,
    rung12_lean_loop.RUNG,
    rung13_spread_copies.RUNG,
    rung14_stream_k.RUNG,
    rung15_column_order.RUNG,
    rung16_edge_strips.RUNG,
    rung17_padded_b.RUNG,
)


# Rungs written after the newest stored benchmark (benchmarks/results/*_sgemm.json,
# which docs/sgemm-ladder.md and tests/test_worklog.py hold the catalogue to).
# LADDER.configs() and LADDER.variant() know them, and gemmlab.measure.run.run(kernel_id,
# shape, spec=LADDER.variant(kernel_id, {})) runs them; they move into RUNGS, and with
# it into the catalogue, in the change that stores a benchmark measuring them.
# From rung 18 on they serve the shapes the large tiles lose (issue 21).
CANDIDATE_RUNGS: tuple[Rung, ...] = (
    rung18_small_tile.RUNG,
    rung19_split_k.RUNG,
    rung20_skinny.RUNG,
    rung21_skinny_n.RUNG,
    rung22_gemv_split.RUNG,
    rung23_cluster_split_k.RUNG,
)

LADDER = Ladder("FP32 ladder", RUNGS, limits, build, candidates=CANDIDATE_RUNGS)
SGEMM_KERNELS: tuple[KernelSpec, ...] = LADDER.kernels


def outputs_per_thread(spec: KernelSpec) -> int:
    return LADDER.rung(spec.id).outputs(spec.config or {})


def threads_per_block(spec: KernelSpec) -> int:
    return LADDER.rung(spec.id).threads(spec.config or {})


def block_tile(spec: KernelSpec) -> tuple[int, int]:
    """Rows x columns of C one block computes."""
    return LADDER.rung(spec.id).tile(spec.config or {})
