"""The tensor-core ladder on the GPU: every rung, every element type, on
shapes with ragged edges, multi-wave grids and odd cluster pairs, verified
against the float64 reference; every searched configuration too; and the
cuBLAS baseline in the same types."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import marked_smoke
from gemmlab.core import gpu
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.kernels.tensor import spec as tensor
from gemmlab.problems import tensor as tensor_problem

pytestmark = pytest.mark.gpu


def _runs_here(spec: KernelSpec) -> bool:
    info = gpu.describe(0)
    return not spec.archs or info.arch in [a.rstrip("af") for a in spec.archs]


SHAPES = [
    Shape(256, 256, 256),
    Shape(300, 520, 136),  # ragged M and N, K not a multiple of the 64-deep stages
    Shape(1, 33, 72),
    Shape(7, 40, 72),  # N a multiple of 8, as the TMA-store rung's C needs; still one ragged tile
    Shape(384, 256, 64),  # three 128-row tiles: the cluster's second pair has one block off the matrix
    Shape(4096, 2048, 128),  # 256 tiles of 128 x 256: persistent blocks take two or more
]
# Each rung, type and shape it takes (the TMA-store rung refuses N = 33, test_tensor.py checks how).
CASES = [
    (r.id, dtype, s)
    for r in tensor.RUNGS
    for dtype in r.dtypes
    for s in SHAPES
    if not catalogue.get(r.id).violations(s, 0, dtype)
]


@pytest.mark.parametrize(
    ("kernel_id", "dtype", "shape"),
    marked_smoke(CASES, ("tc_wmma", "bfloat16", Shape(256, 256, 256))),
    ids=[f"{k}-{d}-{s}" for k, d, s in CASES],
)
def test_rung_verifies(kernel_id: str, dtype: str, shape: Shape) -> None:
    from gemmlab.measure.run import run

    spec = catalogue.get(kernel_id)
    if not _runs_here(spec):
        pytest.skip(f"{kernel_id} needs {', '.join(spec.archs)}")
    result = run(kernel_id, shape, dtype=dtype, reps=2, warmup=1, baseline=False)
    assert 0 <= result.error <= result.tolerance
    assert result.config == dict(zip(spec.template_params, spec.template_extra, strict=True))


@pytest.mark.parametrize("kernel_id", [r.id for r in tensor.RUNGS])
def test_every_searched_configuration_verifies(kernel_id: str) -> None:
    from gemmlab.measure.run import run

    for config in catalogue.configs(kernel_id):
        spec = catalogue.variant(kernel_id, config)
        if not _runs_here(spec):
            pytest.skip(f"{kernel_id} needs {', '.join(spec.archs)}")
        # N = 776 where C is a tensor map (whole 16-byte rows), else an odd 777.
        shape = Shape(520, 776 if spec.n_bytes_multiple else 777, 200)
        result = run(kernel_id, shape, dtype=spec.dtypes[0], reps=1, warmup=1, baseline=False, spec=spec)
        assert result.error <= result.tolerance, config


@pytest.mark.parametrize("kernel_id", ["tc_mma_pipeline", "tc_persistent", "tc_cluster"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 700), n=st.integers(1, 700), k_pieces=st.integers(1, 60))
def test_fuzzed_shapes_verify(kernel_id: str, m: int, n: int, k_pieces: int) -> None:
    from gemmlab.measure.run import run

    spec = catalogue.get(kernel_id)
    if not _runs_here(spec):
        pytest.skip(f"{kernel_id} needs {', '.join(spec.archs)}")
    result = run(kernel_id, Shape(m, n, 8 * k_pieces), dtype="bfloat16", reps=1, warmup=1, baseline=False)
    assert result.error <= result.tolerance


@pytest.mark.parametrize("kernel_id", ["tc_tma_store"])
@pytest.mark.parametrize("dtype", ["bfloat16-out", "tf32"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 700), n_pieces=st.integers(1, 90), k_pieces=st.integers(1, 60))
def test_fuzzed_shapes_verify_with_c_by_tma(kernel_id: str, dtype: str, m: int, n_pieces: int, k_pieces: int) -> None:
    """N in whole 16-byte rows of C (8 bfloat16 elements), any M, K in whole 16-byte pieces."""
    from gemmlab.measure.run import run

    spec = catalogue.get(kernel_id)
    if not _runs_here(spec):
        pytest.skip(f"{kernel_id} needs {', '.join(spec.archs)}")
    result = run(kernel_id, Shape(m, 8 * n_pieces, 8 * k_pieces), dtype=dtype, reps=1, warmup=1, baseline=False)
    assert result.error <= result.tolerance


@pytest.mark.parametrize("dtype", tensor_problem.DTYPES)
def test_cublas_baseline_computes_the_same_product(dtype: str) -> None:
    """The baseline is only a fair comparison if it does the same work: its
    output, in the same layout, matches the float64 reference."""
    from gemmlab.core.dtypes import TOLERANCE
    from gemmlab.measure.run import run
    from gemmlab.problems.base import relative_error

    cp = gpu.cupy()
    point = catalogue.point("tc_wmma", Shape(300, 520, 136), dtype=dtype)
    prepared = tensor_problem.prepare_tensor(cp, point, cp.random.default_rng(7))
    _a, _b, _c, ref, lib_out = prepared.buffers[:5]
    lib_out.fill(cp.nan)
    prepared.baseline()
    cp.cuda.get_current_stream().synchronize()
    assert relative_error(cp, lib_out, ref) <= TOLERANCE[dtype]

    result = run("tc_wmma", Shape(512, 384, 256), dtype=dtype, reps=3)
    assert result.baseline_name == tensor_problem.baseline_name(dtype)
    assert result.baseline_gflops and result.baseline_gflops > 0


def test_cublas_baseline_with_bfloat16_c_computes_the_same_product() -> None:
    """bfloat16-out's baseline writes a bfloat16 C; widened, it matches the
    reference as closely as the rounding allows, and it is poisoned with a
    bfloat16 NaN that the check would catch."""
    from gemmlab.core.dtypes import TOLERANCE
    from gemmlab.measure.run import run
    from gemmlab.problems.base import BF16_NAN, bf16_value, relative_error

    cp = gpu.cupy()
    point = catalogue.point("tc_tma_store", Shape(300, 520, 136), dtype="bfloat16-out")
    prepared = tensor_problem.prepare_tensor(cp, point, cp.random.default_rng(7))
    _a, _b, c, ref, lib_out = prepared.buffers[:5]
    assert c.dtype == cp.uint16 and lib_out.dtype == cp.uint16
    prepared.poison()
    assert prepared.error() != prepared.error()  # NaN: an unwritten C fails the check
    lib_out.fill(BF16_NAN)
    prepared.baseline()
    cp.cuda.get_current_stream().synchronize()
    error = relative_error(cp, bf16_value(cp, lib_out), ref)
    assert 1e-4 < error <= TOLERANCE["bfloat16-out"]  # rounded to bfloat16: above the float32-C errors

    spec = catalogue.get("tc_tma_store")
    if not _runs_here(spec):
        pytest.skip(f"tc_tma_store needs {', '.join(spec.archs)}")
    result = run("tc_tma_store", Shape(512, 384, 256), dtype="bfloat16-out", reps=3)
    assert result.baseline_name == tensor_problem.baseline_name("bfloat16-out")
    assert 1e-4 < result.error <= result.tolerance
    assert result.baseline_gflops and result.baseline_gflops > 0
