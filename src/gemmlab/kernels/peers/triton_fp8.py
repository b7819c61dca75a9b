"""Peer rung triton_fp8: the lowp ladder's FP8 GEMM with per-tensor scales
(problems/lowp.py: C = scale_a * scale_b * A.B^T, A M x K and B N x K in
e4m3, both K-major, C float32 or bfloat16) as a Triton kernel.

The one idea over triton_blocked: ``tl.dot`` of two ``tl.float8e4nv`` tiles
is a Hopper FP8 wgmma, and Triton lets one say how far its reduced-precision
sum may run before the partial sum moves into FP32 registers
(``max_num_imprecise_acc``). Triton's default on sm_90 is never (2^30); this
rung promotes every BK = 128 K, as the CUDA C++ rung tc_fp8_wgmma does
(PROMOTE=1), so both are held to the same tolerance (the lowp problem's
chain of 128). The two scales are applied once, to the FP32 sums, in the
epilogue. Masks cover the edges, so M, N and K are free.

Prediction: below tc_fp8_wgmma (962 TFLOP/s at 8192 on the H100) by what
triton_tc_blocked loses to the bfloat16 rungs (about a third at 4096), plus
the promotion's extra FP32 adds, which Triton cannot hide behind a second
warpgroup's wgmmas the way the warp-specialised CUDA rung does. Measured:
pending the GPU run (docs/peer-ladders.md).
"""

from __future__ import annotations

import triton
import triton.language as tl

from gemmlab.kernels.peers.triton_blocked import GROUP, tile_position
from gemmlab.problems.lowp import SCALE_BLOCK

# K summed inside the tensor cores between moves into FP32: the chain of the rung's problem (spec.py).
PROMOTE_K = SCALE_BLOCK
CONFIGS = (
    triton.Config({"BM": 128, "BN": 128, "BK": PROMOTE_K}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 256, "BK": PROMOTE_K}, num_warps=8, num_stages=3),
    triton.Config({"BM": 64, "BN": 128, "BK": PROMOTE_K}, num_warps=4, num_stages=5),
)


@triton.jit
def scaled_fp8_gemm(
    a, b, c, scale_a, scale_b, M, N, K, stride_am, stride_bn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
):  # fmt: skip
    tile_m, tile_n = tile_position(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP)
    rows = tile_m * BM + tl.arange(0, BM)
    cols = tile_n * BN + tl.arange(0, BN)
    steps = tl.arange(0, BK)
    a_at = a + rows[:, None] * stride_am + steps[None, :]
    b_at = b + cols[None, :] * stride_bn + steps[:, None]  # B's N x K rows read as a K x N tile
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        in_k = (k0 + steps) < K
        a_tile = tl.load(a_at, mask=(rows[:, None] < M) & in_k[None, :], other=0.0)
        b_tile = tl.load(b_at, mask=in_k[:, None] & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a_tile, b_tile, acc, max_num_imprecise_acc=BK)
        a_at += BK
        b_at += BK
    acc *= tl.load(scale_a) * tl.load(scale_b)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c + rows[:, None] * N + cols[None, :], acc.to(c.dtype.element_ty), mask=inside)


def launcher(operands, config: triton.Config):
    """The launch of one tile configuration on the operands (codes viewed as torch's float8_e4m3fn)."""
    o = operands
    if o.scale_a is None or o.a.element_size() != 1:
        raise ValueError("triton_fp8 solves the lowp ladder's FP8 problem only: e4m3 A and B with their scales")
    grid = (triton.cdiv(o.m, config.kwargs["BM"]) * triton.cdiv(o.n, config.kwargs["BN"]),)

    def launch():
        return scaled_fp8_gemm[grid](
            o.a, o.b, o.c, o.scale_a, o.scale_b, o.m, o.n, o.k, o.a.stride(0), o.b.stride(0), GROUP=GROUP,
            num_warps=config.num_warps, num_stages=config.num_stages, **config.kwargs,
        )  # fmt: skip

    return launch


def configs(itemsize: int) -> tuple[triton.Config, ...]:
    return CONFIGS


KERNEL = scaled_fp8_gemm


def signature(element: str, config: triton.Config, fp32: bool) -> tuple[dict[str, str], dict[str, object]]:
    """The argument types and constants of one compile (ahead.py); ``element`` is fp8e4nv, C float32."""
    pointers = {"a": f"*{element}", "b": f"*{element}", "c": "*fp32", "scale_a": "*fp32", "scale_b": "*fp32"}
    scalars = dict.fromkeys(("M", "N", "K", "stride_am", "stride_bn"), "i32")
    constants = {"GROUP": GROUP, **config.kwargs}
    return {**pointers, **scalars, **dict.fromkeys(constants, "constexpr")}, constants
