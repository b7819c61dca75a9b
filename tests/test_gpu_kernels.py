"""Every catalogue kernel, every block edge, several shapes: verified on the GPU."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from conftest import marked_smoke
from gemmlab.core.errors import ConstraintError, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.measure.sanitize import check, small_shapes

pytestmark = pytest.mark.gpu

CASES = [
    (spec.id, edge, shape)
    for spec in catalogue.CATALOGUE
    for edge in (spec.block_edges or (0,))
    for shape in small_shapes(spec, edge)
]


def test_every_kernel_has_three_shapes() -> None:
    for spec in catalogue.CATALOGUE:
        for edge in spec.block_edges or (0,):
            shapes = small_shapes(spec, edge)
            assert len(shapes) >= 2, (spec.id, edge)
            assert any(s.is_square for s in shapes)
            assert any(not s.is_square for s in shapes)


@pytest.mark.parametrize(
    ("kernel_id", "edge", "shape"),
    marked_smoke(CASES, ("tiled", 16, Shape.square(128))),
    ids=[f"{k}-b{e}-{s}" for k, e, s in CASES],
)
def test_kernel_verifies(kernel_id: str, edge: int, shape: Shape) -> None:
    from gemmlab.measure.run import run

    result = run(kernel_id, shape, edge, reps=2, warmup=1, baseline=False)
    assert result.error <= result.tolerance
    if result.dtype == "int32":
        assert result.error == 0.0
    assert result.timing.median_ms > 0
    assert (result.gbytes_per_s if result.metric == "gbs" else result.gflops) > 0


@pytest.mark.smoke
def test_cli_run_prints_a_verified_point(tmp_path) -> None:
    """`gemmlab run`, as a person types it: verified, timed, beside cuBLAS."""
    from gemmlab.cli.app import app

    args = ["run", "tiled", "--size", "256", "--block", "16", "--reps", "3", "--db", str(tmp_path / "none.sqlite")]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    point = json.loads(result.stdout)
    assert point["kernel"] == "tiled" and point["block_edge"] == 16
    assert point["error"] <= point["tolerance"] and point["gflops"] > 0 and point["baseline_gflops"] > 0


@pytest.mark.whole_gpu  # a ratio of two timings
def test_large_square_against_cublas() -> None:
    from gemmlab.measure.run import run

    result = run("tiled", Shape.square(1024), 32, reps=5)
    assert result.error < 1e-5
    assert result.baseline_gflops and result.baseline_gflops > 0
    assert 0 < result.ratio_to_baseline < 2


def test_wrong_result_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel launched on too small a grid leaves part of C poisoned: no figure."""
    from gemmlab.measure import run as run_module

    spec = catalogue.get("naive")
    half_grid = lambda s, b: (s.n // b // 2, s.m // b, 1)
    broken = dataclasses.replace(spec, grid=half_grid)
    monkeypatch.setitem(catalogue._BY_ID, "naive", broken)
    with pytest.raises(VerificationError, match="wrong result"):
        run_module.run("naive", Shape.square(64), 16, reps=1, baseline=False)


def test_constraint_refused_before_launch() -> None:
    from gemmlab.measure.run import run

    with pytest.raises(ConstraintError, match="not a multiple"):
        run("tiled", Shape.square(1000), 16)


def test_memcheck_clean_on_every_kernel() -> None:
    report = check(tool="memcheck")
    assert report.points >= len(catalogue.CATALOGUE)
    assert report.clean, report.findings()
