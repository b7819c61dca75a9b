"""Programmatic dependent launch on the GPU: a launch that reads what the
launch before it wrote must see it. tc_small writes C1 = A . B1^T (bfloat16),
and a second tc_small launched right behind it on the same stream, with no
synchronisation between them, reads C1 as its A. C1 is poisoned with NaN
before each first launch, so a second launch that started reading early
(its griddepcontrol.wait missing or misplaced) would leave NaNs in D."""

from __future__ import annotations

import pytest

from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from test_gpu_tensor_shapes import _on_hopper

pytestmark = pytest.mark.gpu

NAN_BF16 = 0x7FC0


def _bf16(cp, x):
    """float32 -> bfloat16 bit patterns (truncated: the values are then exactly representable)."""
    return (x.astype(cp.float32).view(cp.uint32) >> 16).astype(cp.uint16)


def _decode(cp, bits):
    return (bits.astype(cp.uint32) << 16).view(cp.float32)


def test_a_dependent_launch_reads_what_the_launch_before_it_wrote():
    import cupy as cp

    from gemmlab.backends.nvrtc import dependent_launch
    from gemmlab.measure.gemm import launch_gemm
    from gemmlab.problems.base import GemmOperands

    _on_hopper("tc_small")
    m, k, n1, n2 = 4096, 4096, 128, 64
    first = catalogue.variant("tc_small", {"BM": 64, "BN": 128, "STAGES": 8, "SPLITS": 2})
    second = catalogue.variant("tc_small", {"BM": 64, "BN": 64, "STAGES": 4})
    point = catalogue.point(second.id, Shape(m, n2, n1), None, "bfloat16-out", spec=second)
    assert dependent_launch(point), "on a Hopper GPU the second launch should ask for PDL"
    rng = cp.random.default_rng(7)
    a = _bf16(cp, rng.standard_normal((m, k), dtype=cp.float32))
    b1 = _bf16(cp, rng.standard_normal((n1, k), dtype=cp.float32) / 64)  # stored N x K, as the kernels read B
    b2 = _bf16(cp, rng.standard_normal((n2, n1), dtype=cp.float32))
    want_c1 = _decode(cp, a).astype(cp.float64) @ _decode(cp, b1).astype(cp.float64).T
    for _ in range(20):
        c1 = cp.full((m, n1), NAN_BF16, dtype=cp.uint16)
        d = cp.full((m, n2), NAN_BF16, dtype=cp.uint16)
        launch_gemm(first, "bfloat16-out", GemmOperands(a, b1, c1, c1))
        launch_gemm(second, "bfloat16-out", GemmOperands(c1, b2, d, d))
        cp.cuda.get_current_stream().synchronize()
        got_c1, got_d = _decode(cp, c1).astype(cp.float64), _decode(cp, d).astype(cp.float64)
        assert not bool(cp.isnan(got_d).any()), "the second launch read C1 before the first had written it"
        assert float(cp.abs(got_c1 - want_c1).max()) <= 1e-2 * float(cp.abs(want_c1).max())
        want_d = got_c1 @ _decode(cp, b2).astype(cp.float64).T  # from the C1 it read, rounded as stored
        assert float(cp.abs(got_d - want_d).max()) <= 1e-2 * float(cp.abs(want_d).max())


@pytest.mark.parametrize(
    ("rung", "config"),
    [
        ("sgemm_split_k", {"BM": 64, "BN": 64, "STAGES": 3, "SPLITS": 4}),  # counters in a workspace
        ("sgemm_cluster_split_k", {"BM": 64, "BN": 128, "WM": 32, "WN": 32, "STAGES": 4, "SPLITS": 2, "GROUPS": 2}),
    ],
)
def test_float32_dependent_launches_read_what_the_launch_before_wrote(rung, config):
    """The same pair in FP32 (alpha = 1, beta = 0): the second launch's A is the first's C."""
    import cupy as cp

    from gemmlab.backends.nvrtc import dependent_launch
    from gemmlab.measure.gemm import launch_gemm
    from gemmlab.problems.base import GemmOperands

    _on_hopper(rung)
    spec = catalogue.variant(rung, config)
    m, k, n1, n2 = 512, 512, 512, 256
    assert dependent_launch(catalogue.point(spec.id, Shape(m, n2, n1), None, "float32", spec=spec))
    rng = cp.random.default_rng(11)
    a = rng.standard_normal((m, k), dtype=cp.float32)
    b1 = rng.standard_normal((k, n1), dtype=cp.float32) / 16  # stored K x N, as the FP32 ladder reads B
    b2 = rng.standard_normal((n1, n2), dtype=cp.float32)
    want_c1 = a.astype(cp.float64) @ b1.astype(cp.float64)
    for _ in range(20):
        c1 = cp.full((m, n1), cp.nan, dtype=cp.float32)
        d = cp.full((m, n2), cp.nan, dtype=cp.float32)
        launch_gemm(spec, "float32", GemmOperands(a, b1, cp.zeros_like(c1), c1))
        launch_gemm(spec, "float32", GemmOperands(c1, b2, cp.zeros_like(d), d))
        cp.cuda.get_current_stream().synchronize()
        assert not bool(cp.isnan(d).any()), "the second launch read C1 before the first had written it"
        assert float(cp.abs(c1 - want_c1).max()) <= 1e-4 * float(cp.abs(want_c1).max())
        want_d = c1.astype(cp.float64) @ b2.astype(cp.float64)
        assert float(cp.abs(d - want_d).max()) <= 1e-4 * float(cp.abs(want_d).max())
