"""Peer rung triton_blocked: one Triton program per tile of C, K walked in
steps, the tile shape chosen once per run from a short list by timing each.

The one idea: say what a block does with whole tiles (load, dot, store) and
let Triton choose the threads, the shared-memory staging, the software
pipeline (``num_stages``) and the tensor-core instructions. The same kernel
serves both ladders' layouts through strides: the tensor ladder's B is N x K
(K-major), the FP32 ladder's K x N; the FP32 ladder's epilogue reads C_in for
alpha * A.B + beta * C_in. FP32 runs with ``input_precision="ieee"`` (no TF32:
the FP32 ladder's precision check would refuse it, rightly).

Prediction: near the CUDA C++ ladder's mma.sync rungs in bfloat16 (Triton
emits wgmma on Hopper for tl.dot when the tile allows), and near the FP32
ladder's register-tiled rungs in float32. Measured: pending the GPU run
(docs/peer-ladders.md).
"""

from __future__ import annotations

import triton
import triton.language as tl

# The tiles tried at bind time (gemmlab.kernels.peers.tuning): a few shapes
# that fit Hopper's shared memory at their stage counts, named as Triton names them.
CONFIGS_16 = (
    triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 256, "BK": 64}, num_warps=8, num_stages=3),
    triton.Config({"BM": 64, "BN": 128, "BK": 64}, num_warps=4, num_stages=4),
)
CONFIGS_32 = (
    triton.Config({"BM": 128, "BN": 128, "BK": 32}, num_warps=8, num_stages=3),
    triton.Config({"BM": 64, "BN": 128, "BK": 32}, num_warps=4, num_stages=4),
    triton.Config({"BM": 128, "BN": 64, "BK": 16}, num_warps=4, num_stages=4),
)
# Consecutive programs take tiles down a column of GROUP tiles before moving
# right, so a wave reuses strips of B from L2 (the grouped order of CUTLASS's swizzle).
GROUP = 8


@triton.jit
def tile_position(tile, tiles_m, tiles_n, GROUP: tl.constexpr):
    """(row, column) of tile ``tile`` of C in grouped order."""
    per_group = GROUP * tiles_n
    first_row = (tile // per_group) * GROUP
    rows_here = min(tiles_m - first_row, GROUP)
    return first_row + (tile % per_group) % rows_here, (tile % per_group) // rows_here


@triton.jit
def blocked_gemm(
    a, b, c_in, c, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    alpha, beta,
    HAS_C_IN: tl.constexpr, IEEE: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
):  # fmt: skip
    tile_m, tile_n = tile_position(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP)
    rows = tile_m * BM + tl.arange(0, BM)
    cols = tile_n * BN + tl.arange(0, BN)
    steps = tl.arange(0, BK)
    a_at = a + rows[:, None] * stride_am + steps[None, :] * stride_ak
    b_at = b + steps[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        # Masks cover the last partial tile in every dimension; the zeros add nothing.
        in_k = (k0 + steps) < K
        a_tile = tl.load(a_at, mask=(rows[:, None] < M) & in_k[None, :], other=0.0)
        b_tile = tl.load(b_at, mask=in_k[:, None] & (cols[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a_tile, b_tile, acc, input_precision="ieee")
        else:
            acc = tl.dot(a_tile, b_tile, acc)
        a_at += BK * stride_ak
        b_at += BK * stride_bk
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    out = rows[:, None] * N + cols[None, :]
    if HAS_C_IN:
        acc = alpha * acc + beta * tl.load(c_in + out, mask=inside, other=0.0)
    tl.store(c + out, acc.to(c.dtype.element_ty), mask=inside)


def launcher(operands, config: triton.Config):
    """The launch of one tile configuration on the operands (a Triton
    CompiledKernel's result comes back, so gemmlab reads its resources)."""
    o = operands
    grid = (triton.cdiv(o.m, config.kwargs["BM"]) * triton.cdiv(o.n, config.kwargs["BN"]),)

    def launch():
        return blocked_gemm[grid](
            o.a, o.b, o.c_in if o.c_in is not None else o.c, o.c, o.m, o.n, o.k,
            o.a.stride(0), o.a.stride(1), o.b_stride_k, o.b_stride_n, o.alpha, o.beta,
            HAS_C_IN=o.c_in is not None, IEEE=o.a.dtype.itemsize == 4, GROUP=GROUP,
            num_warps=config.num_warps, num_stages=config.num_stages, **config.kwargs,
        )  # fmt: skip

    return launch


def configs(itemsize: int) -> tuple[triton.Config, ...]:
    return CONFIGS_32 if itemsize == 4 else CONFIGS_16


KERNEL = blocked_gemm


def signature(element: str, config: triton.Config, fp32: bool) -> tuple[dict[str, str], dict[str, object]]:
    """The argument types and constants of one compile (``element``: Triton's
    name of A's and B's type), for compiling ahead of any launch (ahead.py)."""
    pointers = {"a": f"*{element}", "b": f"*{element}", "c_in": "*fp32", "c": "*fp32"}
    scalars = dict.fromkeys(("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn"), "i32")
    constants = {"HAS_C_IN": fp32, "IEEE": fp32, "GROUP": GROUP, **config.kwargs}
    return {**pointers, **scalars, "alpha": "fp32", "beta": "fp32", **dict.fromkeys(constants, "constexpr")}, constants
