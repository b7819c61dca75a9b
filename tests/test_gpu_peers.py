"""The peer rungs on the GPU: each verified and timed by the runner beside the
same library baseline as its CUDA C++ ladder, at a square size and at a shape
no tile divides (with the first K its rows take); tuning runs once at bind, never among the timed launches,
and the configuration it chose is stored with the result."""

from __future__ import annotations

import pytest

from gemmlab.core.errors import ConstraintError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.peers.spec import MODELS, PEERS, PeerSpec, installed
from gemmlab.measure.run import run

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not installed("torch"), reason="the peer rungs' arrays are torch's")]
SQUARE = Shape.square(512)
# 333 and 516 divide by no tile; N % 4 == 0 and K % 8 == 0 are what the TMA rungs' 16-byte rows need;
# K = 264 leaves a last k-tile of 8 (of 64) or 8 (of 128): TMA's zero fill or the masks must cover it.
# e4m3 through TMA needs K % 16 == 0: K = 272 leaves a last k-tile of 16 of 128 for the zero fill.
AWKWARD = (Shape(333, 516, 264), Shape(333, 516, 272))


def _awkward(spec: PeerSpec, dtype: str) -> Shape:
    """The first awkward shape the rung takes in this element type."""
    return next(shape for shape in AWKWARD if not spec.violations(shape, 0, dtype))


def _case(spec_id: str, model: str, dtype: str, shape: Shape) -> object:
    extra = MODELS[model]
    needs = pytest.mark.skipif(not installed(extra.module), reason=f"needs the {extra.extra} extra")
    return pytest.param(spec_id, dtype, shape, marks=needs, id=f"{spec_id}-{dtype}-{shape}")


CASES = [_case(s.id, s.model, d, shape) for s in PEERS for d in s.dtypes for shape in (SQUARE, _awkward(s, d))]


@pytest.mark.parametrize(("kernel", "dtype", "shape"), CASES)
def test_a_peer_rung_is_verified_beside_its_ladders_baseline(kernel: str, dtype: str, shape: Shape) -> None:
    result = run(kernel, shape, dtype=dtype, reps=5, max_seconds=2.0)
    assert result.backend == "peers"
    assert result.error <= result.tolerance
    assert result.gflops > 0
    # The configuration bind chose, as the store keeps it (Triton's has its warps, CuTe's its stages).
    assert result.config and ("num_warps" in result.config or "stages" in result.config)
    if shape.m % 16 == 0 or not dtype.startswith("e4m3"):  # torch._scaled_mm takes multiples of 16 only
        assert result.baseline_gflops and result.baseline_gflops > 0
        # The FP32 ladder's baseline is SGEMM with alpha and beta; the tensor ladder's GemmEx in its types.
        assert ("SGEMM" in result.baseline_name) == (dtype == "float32")


@pytest.mark.parametrize("dtype", ["e4m3", "e4m3-bf16"])
def test_the_cute_fp8_rung_refuses_k_that_tma_cannot_describe_before_touching_the_gpu(dtype: str) -> None:
    # The spec refuses it before the rung's module (and its extra) is imported.
    with pytest.raises(ConstraintError, match="K = 264 is not a multiple of 16") as caught:
        run("cute_fp8_wgmma", AWKWARD[0], dtype=dtype, reps=5, max_seconds=2.0)
    assert "triton_fp8_blocked" in caught.value.fix
