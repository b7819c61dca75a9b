"""Peer rung cute_fp8: the lowp ladder's FP8 GEMM with per-tensor scales
(problems/lowp.py: C = scale_a * scale_b * A.B^T, A M x K and B N x K in
e4m3, both K-major, C float32 or bfloat16) as a Hopper wgmma kernel in the
CuTe DSL: cute_wgmma's kernel (TMA loads into an mbarrier ring, wgmma from
shared memory), given e4m3 tiles and told to promote.

The one idea over cute_wgmma: Hopper's FP8 wgmma adds its products into the
accumulator with about 14 significant bits (problems/lowp.py), so the sum
must leave the tensor cores before it runs long. A k-tile here is 128 e4m3
elements (one 128-byte swizzled row, four m64nNk32 wgmmas), the lowp
problem's chain: after each, the kernel waits for its wgmmas, adds their
accumulator into a second, FP32 one, and lets the next tile's first wgmma
overwrite the first accumulator instead of adding to it. The two scales
multiply the FP32 sum once, before C is converted to its type and stored.

FP8 wgmma reads both operands K-major from shared memory (only 16-bit types
may be transposed); the lowp problem's A and B are, so nothing is
rearranged. K must be a multiple of 16 (TMA's 16-byte rows); M and N are
free (zero fill and per-element predicates, as in cute_wgmma).

Prediction: below tc_fp8_wgmma (962 TFLOP/s at 8192 on the H100), which
promotes the same way but hides one warpgroup's promotion behind the
other's wgmmas with a producer warp apart; here every warpgroup waits for
its own wgmmas each tile (wait_group(0)) and the loads share its warps, so
the tensor cores idle during each promotion. Measured (H100, 2026-11-24,
before the runner's hold; benchmarks/results/2026-11-24d_h100_peers-e4m3.txt):
777.3 TFLOP/s at 4096 and 779.4 at 8192, below tc_fp8_wgmma as predicted
(docs/peer-ladders.md).
"""

from __future__ import annotations

from typing import Any

import cuda.bindings.driver as cuda_driver
import cutlass
from cutlass.cute.runtime import from_dlpack, make_fake_tensor

from gemmlab.kernels.peers.cute_wgmma import Config, compiled_launch, current_stream, cute_matrix, fake_matrices
from gemmlab.kernels.peers.cute_wgmma import compile_kernel as compile_kernel  # what ahead.py calls on every CuTe rung

# Two accumulators of 64 x 128 per warpgroup (64 + 64 registers a thread;
# ptxas: 141 in all, no spills): a 256-wide tile would need 256 and spill.
# 4 stages of 128 x 128 x 128 are 128 KiB of shared memory, 6 are 192 KiB
# (tc_fp8_wgmma's default and its search).
CONFIGS = (Config(128, 128, 4, element_bytes=1, promote=True), Config(128, 128, 6, element_bytes=1, promote=True))


def fake_arguments(c_type: type = cutlass.Float32) -> tuple[Any, ...]:
    """The lowp problem's arguments as stand-ins: e4m3 A and B (K a multiple of 16), C, and the two
    one-element float32 scales."""
    scale_a, scale_b = (make_fake_tensor(cutlass.Float32, (1,), (1,), assumed_align=4) for _ in "ab")
    return (*fake_matrices(cutlass.Float8E4M3FN, 16, c_type), scale_a, scale_b, cuda_driver.CUstream(0))


def runtime_arguments(operands: Any) -> tuple[Any, ...]:
    """The codes (torch's float8_e4m3fn) as uint8 bytes that CuTe reads as e4m3, C as stored, and the
    scales themselves, not copies: the problem redraws them in place."""
    import torch

    o, e4m3 = operands, cutlass.Float8E4M3FN
    a, b = (cute_matrix(t.view(torch.uint8), 16, e4m3) for t in (o.a, o.b))
    scale_a, scale_b = (from_dlpack(s, assumed_align=4) for s in (o.scale_a, o.scale_b))
    return a, b, cute_matrix(o.c, 4), scale_a, scale_b, current_stream()


def launcher(operands: Any, config: Config):
    """The launch of one configuration on the lowp problem's operands."""
    o = operands
    if o.scale_a is None or not o.b_kmajor or o.a.element_size() != 1:
        raise ValueError("cute_fp8 solves the lowp ladder's FP8 problem only: e4m3 A and B, K-major, with scales")
    return compiled_launch(o, config, runtime_arguments(o))


def configs(itemsize: int) -> tuple[Config, ...]:
    return CONFIGS
