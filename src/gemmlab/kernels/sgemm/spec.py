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

from gemmlab.kernels.ladder import Ladder, Rung, rungs_beside
from gemmlab.kernels.sgemm.family import build, limits
from gemmlab.kernels.spec import KernelSpec

# The rungs in their numbers' order, each the RUNG of its rungNN_name.py beside
# this file, then the candidates: modules that set CANDIDATE = True, written
# after the newest stored benchmark (benchmarks/results/*_sgemm.json, which docs/sgemm-ladder.md
# and tests/test_worklog.py hold the catalogue to). LADDER.configs(),
# LADDER.variant() and the dispatcher's search know them; they join the
# catalogue when the change that stores a benchmark measuring them drops CANDIDATE.
# From rung 18 on they serve the shapes the large tiles lose (issue 21).
RUNGS: tuple[Rung, ...]
CANDIDATE_RUNGS: tuple[Rung, ...]
RUNGS, CANDIDATE_RUNGS = rungs_beside(__file__, __package__ or "")

LADDER = Ladder("FP32 ladder", RUNGS, limits, build, candidates=CANDIDATE_RUNGS)
SGEMM_KERNELS: tuple[KernelSpec, ...] = LADDER.kernels


def outputs_per_thread(spec: KernelSpec) -> int:
    return LADDER.rung(spec.id).outputs(spec.config or {})


def threads_per_block(spec: KernelSpec) -> int:
    return LADDER.rung(spec.id).threads(spec.config or {})


def block_tile(spec: KernelSpec) -> tuple[int, int]:
    """Rows x columns of C one block computes."""
    return LADDER.rung(spec.id).tile(spec.config or {})
