"""CPU baselines: verified against float64 on small shapes, refused when wrong."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_numba
from gemmlab.backends import cpu
from gemmlab.core.dtypes import TOLERANCE
from gemmlab.core.errors import ConstraintError, GemmlabError, UnknownName, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.store.store import Store

SHAPES = [Shape.square(64), Shape(37, 70, 129), Shape(1, 5, 300)]


@pytest.mark.parametrize("dtype", cpu.CPU_DTYPES)
@pytest.mark.parametrize(
    "kernel", [k if k == "cpu_blas" else pytest.param(k, marks=needs_numba) for k in cpu.CPU_KERNELS]
)
def test_baselines_are_correct(kernel: str, dtype: str) -> None:
    for shape in SHAPES:
        result = cpu.run_cpu(kernel, shape, dtype, reps=3, max_seconds=0.2, seed=1)
        assert result["error"] <= TOLERANCE[dtype]
        if dtype == "int32":
            assert result["error"] == 0.0
        assert result["timing"].reps >= 3 and result["timing"].median_ms > 0
        assert result["gflops"] > 0 and result["metric"] == "gflops"
        assert (result["m"], result["n"], result["k"], result["block_edge"]) == (shape.m, shape.n, shape.k, 0)


@needs_numba
def test_tiles_cover_edges_that_do_not_divide() -> None:
    # 130 = 2 full tiles of 64 and 2 left over, in every dimension.
    result = cpu.run_cpu("cpu_blocked", Shape(130, 131, 129), "float32", reps=3, max_seconds=0.1)
    assert result["error"] < 1e-6


def test_a_wrong_result_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def off_by_one(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        np.matmul(a, b, out=c)
        c[0, 0] += 1

    monkeypatch.setattr(cpu, "_function", lambda kernel_id: off_by_one)
    with pytest.raises(VerificationError, match="wrong result"):
        cpu.run_cpu("cpu_blas", Shape.square(16), "int32")


def test_a_forgotten_output_is_caught_by_the_poison(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "_function", lambda kernel_id: lambda a, b, c: None)
    with pytest.raises(VerificationError):
        cpu.run_cpu("cpu_naive", Shape.square(16), "float32")


def test_unknown_kernel_and_dtype() -> None:
    with pytest.raises(UnknownName, match="cpu_naive"):
        cpu.run_cpu("cpu_fast", Shape.square(8))
    with pytest.raises(ConstraintError, match="float64"):
        cpu.run_cpu("cpu_naive", Shape.square(8), "float64")


def test_missing_numba_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu._compiled.cache_clear()
    monkeypatch.setitem(sys.modules, "numba", None)
    try:
        with pytest.raises(GemmlabError, match="numba is not installed") as info:
            cpu.run_cpu("cpu_blocked", Shape.square(8))
        assert "pip install" in info.value.fix
        assert cpu.run_cpu("cpu_blas", Shape.square(8))["error"] < 1e-6  # BLAS needs no numba
    finally:
        cpu._compiled.cache_clear()


def test_without_numba_a_sweep_refuses_the_numba_baselines_and_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gemmlab.studies.points import plan

    monkeypatch.setitem(sys.modules, "numba", None)
    points, refused = plan(list(cpu.CPU_KERNELS), [Shape.square(64)])
    assert [p.kernel for p in points] == ["cpu_blas"]
    assert [label.split()[0] for label, _ in refused] == ["cpu_naive", "cpu_blocked"]
    assert all("pip install 'gemmlab[cpu]'" in why for _, why in refused)


def test_int32_blas_is_labelled() -> None:
    result = cpu.run_cpu("cpu_blas", Shape.square(16), "int32")
    assert any("no BLAS for int32" in w for w in result["warnings"])


@needs_numba
def test_the_store_takes_a_cpu_result(tmp_path: Path) -> None:
    result = cpu.run_cpu("cpu_blocked", Shape.square(32), "float32", reps=3, max_seconds=0.1)
    with Store.open(tmp_path / "r.sqlite") as store:
        store.add_result(store.start_run({}), "kursk-cpu-gpu", result)
        (row,) = store.rows()
    assert row["kernel"] == "cpu_blocked" and row["median_ms"] == result["timing"].median_ms
    assert row["point_key"] == "cpu_blocked|32|32|32|0|float32||cpu|" and row["backend"] == "cpu"
