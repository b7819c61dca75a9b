"""The 8-bit ladder on the GPU: every rung in every type and scaling mode it
takes, on shapes with ragged edges and part tiles of K, against the float64
reference (int8: exact equality with the int64 answer); the error of FP8
wgmma without promotion larger than with it; fuzzed shapes; and PyTorch's
baselines where PyTorch is installed."""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.lowp import spec as lowp
from gemmlab.kernels.spec import KernelSpec
from gemmlab.problems.lowp import SCALINGS

pytestmark = pytest.mark.gpu


def _runs_here(spec: KernelSpec) -> bool:
    info = gpu.describe(0)
    if spec.archs:
        return info.arch in [a.rstrip("af") for a in spec.archs]
    return info.cc >= spec.min_cc


SHAPES = [
    Shape(256, 256, 256),
    Shape(300, 520, 144),  # ragged M and N; K one 128-wide tile and a part tile of 16
    Shape(1, 33, 272),  # one row; two tiles of K and a part
    Shape(200, 136, 48),  # K under one tile; N past one 128-wide block of B's scales
]


def _variants(rung) -> list[tuple[str, dict]]:
    """(dtype, configuration change) for every type and scaling mode the rung takes."""
    modes = [{}]
    if "SCALING" in rung.default:
        modes = [
            {"SCALING": i}
            for i in range(len(SCALINGS))
            if not lowp.LADDER.violations(rung, rung.config({"SCALING": i}))
        ]
    return [(dtype, mode) for dtype in rung.dtypes for mode in modes]


# The persistent FP8 rungs store C by TMA (N in 16-byte rows): tests/test_gpu_fp8_persistent.py.
CASES = [(r.id, dtype, mode) for r in lowp.RUNGS if not r.persistent for dtype, mode in _variants(r)]


@pytest.mark.parametrize(("kernel_id", "dtype", "mode"), CASES, ids=[f"{k}-{d}-{m}" for k, d, m in CASES])
def test_rung_verifies_on_awkward_shapes(kernel_id: str, dtype: str, mode: dict) -> None:
    from gemmlab.measure.run import run

    spec = catalogue.variant(kernel_id, mode)
    if not _runs_here(spec):
        pytest.skip(f"{kernel_id} needs {', '.join(spec.archs) or spec.min_cc}")
    for shape in SHAPES:
        result = run(kernel_id, shape, dtype=dtype, reps=1, warmup=1, baseline=False, spec=spec)
        assert 0 <= result.error <= result.tolerance, (shape, result.error)
        if dtype == "int8":
            assert result.error == 0.0 and result.tolerance == 0.0


def test_fp8_wgmma_errs_more_without_promotion() -> None:
    """The tensor cores' ~14-bit FP8 sums over all of K against 128 K at a time added into FP32."""
    from gemmlab.measure.run import run

    promoted = catalogue.variant("tc_fp8_wgmma", {"PROMOTE": 1})
    unpromoted = catalogue.variant("tc_fp8_wgmma", {"PROMOTE": 0})
    if not _runs_here(promoted):
        pytest.skip("tc_fp8_wgmma needs sm_90a")
    shape = Shape(256, 256, 16384)
    kept = run("tc_fp8_wgmma", shape, dtype="e4m3", reps=1, warmup=1, baseline=False, spec=promoted, seed=3)
    lost = run("tc_fp8_wgmma", shape, dtype="e4m3", reps=1, warmup=1, baseline=False, spec=unpromoted, seed=3)
    assert kept.error <= kept.tolerance < lost.tolerance
    assert lost.error > 2 * kept.error, (lost.error, kept.error)


@pytest.mark.parametrize("kernel_id", ["tc_int8_mma", "tc_int8_wgmma", "tc_fp8_wgmma", "tc_fp8_blockscaled"])
def test_fuzzed_shapes_verify(kernel_id: str) -> None:
    from gemmlab.measure.run import run

    spec = catalogue.get(kernel_id)
    if not _runs_here(spec):
        pytest.skip(f"{kernel_id} needs {', '.join(spec.archs) or spec.min_cc}")

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
    @given(m=st.integers(1, 400), n=st.integers(1, 400), k_pieces=st.integers(1, 40))
    def check(m: int, n: int, k_pieces: int) -> None:
        result = run(kernel_id, Shape(m, n, 16 * k_pieces), reps=1, warmup=1, baseline=False)
        assert result.error <= result.tolerance

    check()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed (the torch extra)")
@pytest.mark.parametrize(("kernel_id", "dtype"), [("tc_int8_wgmma", "int8"), ("tc_fp8_wgmma", "e4m3")])
def test_pytorch_baseline_runs_beside_the_kernel(kernel_id: str, dtype: str) -> None:
    from gemmlab.measure.run import run

    if not _runs_here(catalogue.get(kernel_id)):
        pytest.skip(f"{kernel_id} needs sm_90a")
    result = run(kernel_id, Shape.square(1024), dtype=dtype, reps=3)
    assert result.error <= result.tolerance
    assert result.baseline_name and "torch" in result.baseline_name
    assert result.baseline_gflops and result.baseline_gflops > 0
