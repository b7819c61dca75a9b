"""Verification that is hard to fool, on the GPU: each faulty example is
caught with the message that names its fault; float16, bfloat16 and
alpha/beta kernels of users run verified; catalogue kernels of every problem
still pass between their guard bands."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.core.dtypes import SAME_TYPE_C_TOLERANCE
from gemmlab.core.errors import VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(example: str, shape: Shape, dtype: str | None = None):
    from gemmlab.measure.run import run

    spec = catalogue.get(str(EXAMPLES / example / "matmul.toml"))
    return run(spec.id, shape, spec.block_edges[0], dtype, reps=2, warmup=2, spec=spec)


def _refused(example: str, shape: Shape) -> str:
    with pytest.raises(VerificationError) as caught:
        _run(example, shape)
    return str(caught.value.cause)


# (example, shape, words the message must hold)
FAULTS = [
    ("faulty/oob_write", Shape(100, 96, 80), ["wrote 96 elements outside C", "after its end, the first at offset +0"]),
    ("faulty/lower_precision", Shape(256, 192, 320), ["computes at lower precision than float32", "float16"]),
    ("faulty/accumulate_into_c", Shape.square(128), ["elements of C are NaN", "C[i] += ..."]),
    (
        "faulty/cached_answer",
        Shape(256, 192, 320),
        ["on timed sample 1", "ignores its inputs or returns an answer it computed before"],
    ),
]


@pytest.mark.parametrize(("example", "shape", "words"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_faulty_kernel_is_caught_and_named(example: str, shape: Shape, words: list[str]) -> None:
    cause = _refused(example, shape)
    assert all(w in cause for w in words), cause


def test_the_out_of_bounds_kernel_is_right_when_no_thread_is_past_c() -> None:
    """Its bug needs a row M: at a multiple of its tile it passes, which is
    why the guard bands, not the result, are what catch it."""
    result = _run("faulty/oob_write", Shape(128, 96, 80))
    assert result.error <= result.tolerance


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_kernel_runs_verified_in_its_own_type(dtype: str) -> None:
    result = _run("half_naive", Shape(200, 136, 300), dtype)
    assert result.tolerance == SAME_TYPE_C_TOLERANCE[dtype]
    # C holds 16-bit values: above float32's errors, within the type's rounding.
    assert 1e-5 < result.error <= result.tolerance
    assert result.baseline_name == f"cuBLAS GemmEx {dtype}, FP32 compute (C = A.B)"
    assert result.baseline_gflops is not None and result.baseline_gflops > 0


def test_a_short_float32_kernel_and_cublas_are_both_timed_from_graphs() -> None:
    """A user's float32 C = A.B kernel at a few microseconds: the cuBLAS side
    is a GemmEx call the runner captures, as the kernel is, so neither side's
    figure holds Python's launch time."""
    result = _run("naive_define", Shape.square(256))
    assert result.baseline_name == "cuBLAS GemmEx float32, FP32 compute (C = A.B)"
    assert result.baseline_timing is not None
    assert result.timing.graph_launches and result.baseline_timing.graph_launches, (
        result.timing.method,
        result.baseline_timing.method,
    )


def test_an_alpha_beta_kernel_runs_verified() -> None:
    result = _run("gemm_alpha_beta", Shape(129, 77, 200))
    assert result.error <= 1e-5
    assert result.baseline_name is not None and "same alpha and beta" in result.baseline_name


def test_an_alpha_beta_kernel_that_ignores_beta_fails(tmp_path: Path) -> None:
    """C is filled with C0 before the checked launch, so leaving out beta*C shows."""
    folder = tmp_path / "no_beta"
    folder.mkdir()
    source = (EXAMPLES / "gemm_alpha_beta" / "matmul.cu").read_text()
    (folder / "matmul.cu").write_text(source.replace(" + beta * C[row * N + col]", " + 0.0f * beta"))
    (folder / "matmul.toml").write_text((EXAMPLES / "gemm_alpha_beta" / "matmul.toml").read_text())
    from gemmlab.measure.run import run

    spec = catalogue.get(str(folder / "matmul.toml"))
    with pytest.raises(VerificationError, match="relative error"):
        run(spec.id, Shape(64, 64, 64), 16, reps=1, spec=spec)


CATALOGUE = [
    ("tiled", Shape(256, 128, 96), 16, "float32"),
    ("tiled_any_size", Shape(300, 200, 100), 16, "float32"),
    ("sgemm_multistage", Shape(127, 129, 131), None, "float32"),
    ("tc_wmma", Shape(512, 384, 256), None, "bfloat16"),
    ("tc_tma_store", Shape(512, 384, 256), None, "bfloat16-out"),  # stores C through a TMA tensor map
    ("transpose_tiled", Shape(1000, 700, 1), 32, "float32"),
    ("vecadd", Shape(1, 100_000, 1), None, "float32"),
]


@pytest.mark.parametrize(("kernel", "shape", "edge", "dtype"), CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_catalogue_kernels_pass_between_guard_bands(kernel: str, shape: Shape, edge: int | None, dtype: str) -> None:
    from gemmlab.core import gpu
    from gemmlab.measure.run import run

    archs = catalogue.get(kernel).archs
    if archs and gpu.describe(0).arch not in [a.rstrip("af") for a in archs]:
        pytest.skip(f"{kernel} needs {', '.join(archs)}")
    result = run(kernel, shape, edge, dtype, reps=2)
    assert result.error <= result.tolerance


def test_the_second_input_set_is_new_and_its_reference_recomputed() -> None:
    from gemmlab.core import gpu
    from gemmlab.problems.base import relative_error

    cp = gpu.cupy()
    point = catalogue.point("tiled_any_size", Shape(100, 60, 40), 16, "float32")
    prepared = point.spec.problem.prepare(cp, point, cp.random.default_rng(5))
    a, b, _c, ref = prepared.buffers[:4]
    pointers, first = (a.data.ptr, b.data.ptr), a.copy()
    prepared.redraw()
    assert (a.data.ptr, b.data.ptr) == pointers and float(cp.abs(a - first).max()) > 0.1
    assert relative_error(cp, a.astype(cp.float64) @ b.astype(cp.float64), ref) < 1e-12
