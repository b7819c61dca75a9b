"""The physics floor (gemmlab.measure.floor): a time under what the GPU's
peak allows is refused, naming the figures; honest times, 3xTF32 float32
included, pass."""

from __future__ import annotations

import pytest

from gemmlab.core.errors import VerificationError
from gemmlab.measure.floor import MARGIN, floor_ms, refuse_under

# An H200's nominal rates at its 1980 MHz boost clock: 132 SMs.
H200 = {
    "fp32_gflops": 2 * 128 * 132 * 1980 / 1e3,
    "tensor_gflops": {d: r * 132 * 1980 / 1e3 for d, r in
                      {"bfloat16": 4096, "float16": 4096, "tf32": 2048, "e4m3": 8192, "int8": 8192}.items()},
    "bandwidth_gbs": 4800.0,
    "l2_bytes": 60 * 2**20,
    "gpu": "NVIDIA H200",
    "clock_mhz": 1980.0,
}  # fmt: skip


def _floor(m: int, n: int, k: int, dtype: str, item: int = 4):
    return floor_ms(2 * m * n * k, (m * k + k * n + m * n) * item, dtype, **H200)


def test_a_float32_gemm_faster_than_3xtf32_allows_is_refused_with_the_figures() -> None:
    floor = _floor(4096, 4096, 4096, "float32")
    # 2 * 4096^3 FLOPs at 535 TFLOP/s / 3: 0.77 ms. cuBLAS's SGEMM takes about 2.6 ms.
    assert floor.ms == pytest.approx(2 * 4096**3 / (2048 * 132 * 1980e6 / 3) * 1e3)
    assert "3xTF32" in floor.why and "NVIDIA H200" in floor.why
    refuse_under([2.6, 2.7], floor, "k")
    refuse_under([floor.ms * (1 - MARGIN / 2)], floor, "k")  # within the margin
    with pytest.raises(VerificationError, match=r"took 226 us .* under the 7\d\d us .*impossible"):
        refuse_under([0.226, 2.6], floor, "k")  # 11.5x cuBLAS: the poison sniffer of issue 48


def test_a_tensor_type_takes_its_own_pipe() -> None:
    bf16 = _floor(8192, 8192, 8192, "bfloat16", 2)
    assert bf16.ms == pytest.approx(2 * 8192**3 / (4096 * 132 * 1980e6) * 1e3) and "tensor cores" in bf16.why
    fp8 = _floor(8192, 8192, 8192, "e4m3-bf16", 1)  # the inputs' type names the pipe
    assert fp8.ms == pytest.approx(bf16.ms / 2)


def test_a_memory_bound_problem_is_held_to_the_bandwidth_beyond_l2() -> None:
    n = 16384
    floor = floor_ms(0, 2 * n * n * 4, "float32", **H200)
    assert floor.ms == pytest.approx((2 * n * n * 4 - 60 * 2**20) / 4800e9 * 1e3) and "GB/s" in floor.why
    small = floor_ms(0, 2 * 1024 * 1024 * 4, "float32", **H200)
    assert small.ms == 0.0  # fits in L2: no floor


def test_an_unknown_gpu_has_no_floor() -> None:
    floor = floor_ms(2 * 512**3, 3 * 512 * 512 * 4, "float32", fp32_gflops=None, tensor_gflops={},
                     bandwidth_gbs=None, l2_bytes=0, gpu="?", clock_mhz=None)  # fmt: skip
    assert floor.ms == 0.0
    refuse_under([1e-9], floor, "k")  # nothing known, nothing refused
