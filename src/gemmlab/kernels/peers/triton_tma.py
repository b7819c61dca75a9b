"""Peer rung triton_tma: a persistent Triton kernel whose operands arrive as
TMA descriptors (Hopper's tensor memory accelerator).

Two ideas over triton_blocked. The grid is one program per SM, and each
program walks the tiles of C in grouped order, so no tile waits for a block
slot and the tail wave is a fraction of a tile rather than of the grid. The
A and B tiles are fetched by TMA from host-built descriptors
(triton.tools.tensor_descriptor.TensorDescriptor): one thread issues a
whole 2-D box, the hardware pads reads past the edge with zeros (no masks in
the loop), and Triton pipelines the loads ``num_stages`` deep. C is stored
with masks through pointers, so its rows need no 16-byte alignment.

Prediction: ahead of triton_blocked at 4096 and up in bfloat16, where the
masked address arithmetic and the tail wave cost; close in float32, whose
FFMA-bound inner product hides the loads either way. Measured: pending the
GPU run (docs/peer-ladders.md).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from gemmlab.kernels.peers.triton_blocked import GROUP, tile_position

CONFIGS_16 = (
    triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 256, "BK": 64}, num_warps=8, num_stages=3),
)
CONFIGS_32 = (
    triton.Config({"BM": 128, "BN": 128, "BK": 32}, num_warps=8, num_stages=3),
    triton.Config({"BM": 64, "BN": 128, "BK": 32}, num_warps=4, num_stages=4),
)


@triton.jit
def persistent_tma_gemm(
    a_desc, b_desc, c_in, c, M, N, K, alpha, beta, programs,
    B_KMAJOR: tl.constexpr, HAS_C_IN: tl.constexpr, IEEE: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
):  # fmt: skip
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    for tile in range(tl.program_id(0), tiles_m * tiles_n, programs):
        tile_m, tile_n = tile_position(tile, tiles_m, tiles_n, GROUP)
        row0, col0 = tile_m * BM, tile_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in tl.range(0, K, BK):
            a_tile = a_desc.load([row0, k0])
            # The tensor ladder's B is N x K: its box is read K-major and transposed as a view.
            b_tile = b_desc.load([col0, k0]).T if B_KMAJOR else b_desc.load([k0, col0])
            if IEEE:
                acc = tl.dot(a_tile, b_tile, acc, input_precision="ieee")
            else:
                acc = tl.dot(a_tile, b_tile, acc)
        rows = row0 + tl.arange(0, BM)
        cols = col0 + tl.arange(0, BN)
        inside = (rows[:, None] < M) & (cols[None, :] < N)
        out = rows[:, None] * N + cols[None, :]
        if HAS_C_IN:
            acc = alpha * acc + beta * tl.load(c_in + out, mask=inside, other=0.0)
        tl.store(c + out, acc.to(c.dtype.element_ty), mask=inside)


def launcher(operands, config: triton.Config):
    """Descriptors for this configuration's boxes, and the launch of one program per SM."""
    o, bm, bn, bk = operands, config.kwargs["BM"], config.kwargs["BN"], config.kwargs["BK"]
    a_desc = TensorDescriptor.from_tensor(o.a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(o.b, [bn, bk] if o.b_kmajor else [bk, bn])
    programs = min(o.sms, triton.cdiv(o.m, bm) * triton.cdiv(o.n, bn))

    def launch():
        return persistent_tma_gemm[(programs,)](
            a_desc, b_desc, o.c_in if o.c_in is not None else o.c, o.c, o.m, o.n, o.k, o.alpha, o.beta, programs,
            B_KMAJOR=o.b_kmajor, HAS_C_IN=o.c_in is not None, IEEE=o.a.dtype.itemsize == 4, GROUP=GROUP,
            num_warps=config.num_warps, num_stages=config.num_stages, **config.kwargs,
        )  # fmt: skip

    return launch


def configs(itemsize: int) -> tuple[triton.Config, ...]:
    return CONFIGS_32 if itemsize == 4 else CONFIGS_16


KERNEL = persistent_tma_gemm


def signature(element: str, config: triton.Config, fp32: bool) -> tuple[dict[str, str], dict[str, object]]:
    """The argument types and constants of one compile, descriptors included (ahead.py)."""
    bm, bn, bk = config.kwargs["BM"], config.kwargs["BN"], config.kwargs["BK"]
    b_box = [bk, bn] if fp32 else [bn, bk]
    types = {"a_desc": f"tensordesc<{element}[{bm}, {bk}]>", "b_desc": f"tensordesc<{element}{b_box}>",
             "c_in": "*fp32", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32", "alpha": "fp32", "beta": "fp32",
             "programs": "i32"}  # fmt: skip
    constants = {"B_KMAJOR": not fp32, "HAS_C_IN": fp32, "IEEE": fp32, "GROUP": GROUP, **config.kwargs}
    return {**types, **dict.fromkeys(constants, "constexpr")}, constants
