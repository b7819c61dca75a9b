"""The memory-bound lab on the GPU: every kernel exact on awkward shapes, sanitizer clean."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import marked_smoke
from gemmlab.core.errors import VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.memory.spec import MEMORY_KERNELS
from gemmlab.measure.bandwidth import bandwidth_table, datasheet_bandwidth, measure_copy_ceiling
from gemmlab.measure.sanitize import check

pytestmark = pytest.mark.gpu

# Square (the lecture's), rectangular both ways, no side a multiple of a tile or
# of 4, and single rows and columns.
MATRIX_SHAPES = [Shape(4000, 4000, 1), Shape(1000, 3000, 1), Shape(1023, 1025, 1), Shape(1, 77, 1), Shape(33, 1, 1)]
# Vector lengths: one element, a prime (a tail for the 16-byte kernels), a power of two.
VECTOR_SHAPES = [Shape(1, 1, 1), Shape(1, 1000003, 1), Shape(1, 2**20, 1)]
VECTOR_KERNELS = ("vecadd", "vecadd_vec4")

CASES = [
    (spec.id, edge, dtype, shape)
    for spec in MEMORY_KERNELS
    for edge in spec.block_edges or (0,)
    for dtype in spec.dtypes
    for shape in (VECTOR_SHAPES if spec.id in VECTOR_KERNELS else MATRIX_SHAPES)
]


@pytest.mark.parametrize(
    ("kernel_id", "edge", "dtype", "shape"),
    marked_smoke(CASES, ("transpose_tiled_padded", 32, "float32", Shape(1023, 1025, 1))),
    ids=[f"{k}-b{e}-{d}-{s.m}x{s.n}" for k, e, d, s in CASES],
)
def test_kernel_is_exact(kernel_id: str, edge: int, dtype: str, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run(kernel_id, shape, edge, dtype, reps=2, warmup=1)
    assert result.error == 0.0
    assert result.metric == "gbs"
    assert result.gbytes_per_s > 0
    assert result.baseline_gbytes_per_s and result.baseline_gbytes_per_s > 0
    assert result.ratio_to_baseline and result.ratio_to_baseline > 0


def test_an_unwritten_element_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """One tile row short of the matrix: the last rows keep their NaN poison."""
    from gemmlab.measure import run as run_module

    spec = catalogue.get("transpose_tiled_padded")
    short = lambda s, b: (-(-s.n // b), s.m // b, 1)
    monkeypatch.setitem(catalogue._BY_ID, spec.id, dataclasses.replace(spec, grid=short))
    with pytest.raises(VerificationError, match="wrong result"):
        run_module.run(spec.id, Shape(1023, 1025, 1), 32, reps=1, baseline=False)


@pytest.mark.whole_gpu  # bandwidths, and each kernel's share of the measured ceiling
def test_copy_ceiling_and_table() -> None:
    from gemmlab.measure.run import run

    ceiling = measure_copy_ceiling(nbytes=2**28, reps=5)
    datasheet = datasheet_bandwidth()
    assert ceiling > 0
    if datasheet:
        assert ceiling < 1.1 * datasheet
    results = [run(k, Shape(4000, 4000, 1), dtype="float32", reps=5) for k in ("copy", "transpose_naive")]
    rows = bandwidth_table(results, ceiling, datasheet)
    assert [r["kernel"] for r in rows] == ["copy", "transpose_naive"]
    assert all(0 < r["fraction_of_ceiling"] < 2 for r in rows)


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_sanitizer_clean(tool: str) -> None:
    report = check([spec.id for spec in MEMORY_KERNELS], tool)
    assert report.points >= len(MEMORY_KERNELS)
    assert report.clean, report.findings()
