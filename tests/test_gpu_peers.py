"""The peer rungs on the GPU: each verified and timed by the runner beside the
same cuBLAS baseline as its CUDA C++ ladder, at a square size and at a shape
no tile divides; tuning runs once at bind, never among the timed launches."""

from __future__ import annotations

import pytest

from gemmlab.core.shapes import Shape
from gemmlab.kernels.peers.spec import PEERS, installed
from gemmlab.measure.run import run

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not (installed("triton") and installed("torch")), reason="needs the triton extra"),
]
# 333 and 516 divide by no tile; N % 4 == 0 and K % 8 == 0 are what the TMA rungs' 16-byte rows need.
SHAPES = (Shape.square(512), Shape(333, 516, 264))
CASES = [(s.id, d, shape) for s in PEERS if s.model == "triton" for d in s.dtypes for shape in SHAPES]


@pytest.mark.parametrize(("kernel", "dtype", "shape"), CASES, ids=[f"{k}-{d}-{s}" for k, d, s in CASES])
def test_a_triton_rung_is_verified_beside_its_ladders_baseline(kernel: str, dtype: str, shape: Shape) -> None:
    result = run(kernel, shape, dtype=dtype, reps=5, max_seconds=2.0)
    assert result.backend == "peers"
    assert result.error <= result.tolerance
    assert result.gflops > 0 and result.baseline_gflops and result.baseline_gflops > 0
    # The FP32 ladder's baseline is SGEMM with alpha and beta; the tensor ladder's GemmEx in its types.
    assert ("SGEMM" in result.baseline_name) == (dtype == "float32")
