"""The distributed ladder on two GPUs of one host (NCCL, NVLink multicast
off): every rung verified, gemmlab's own GEMM used locally, the rows stored.
Skipped where fewer than two GPUs or no torch are present."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gemmlab.cli.app import run_cli
from gemmlab.store.store import Store
from gemmlab.studies.distributed import launch, plan

pytestmark = pytest.mark.gpu


def _gpus() -> int:
    try:
        from gemmlab.core import gpu

        return gpu.device_count()
    except Exception:
        return 0


needs_two = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or _gpus() < 2, reason="needs torch and at least 2 GPUs"
)


@needs_two
def test_every_rung_verifies_on_two_gpus_with_gemmlabs_gemm(tmp_path: Path) -> None:
    out, db = tmp_path / "rows.json", tmp_path / "r.sqlite"
    code = run_cli(["distributed", "--gpus", "1,2", "--sizes", "1024", "--scaling", "strong,weak", "--reps", "3",
                    "--warmup", "1", "--out", str(out), "--db", str(db),
                    "--work-dir", str(tmp_path / "logs")])  # fmt: skip
    assert code == 0, sorted((tmp_path / "logs").rglob("rank*.log"))
    rows = json.loads(out.read_text())["rows"]
    assert {(r["algorithm"], r["gpus"]) for r in rows} == {(a, g) for a in plan.ALGORITHMS for g in (1, 2)}
    for r in rows:
        assert r["verified"] and r["error"] < r["tolerance"], r
        assert r["local_gemm"] == "gemmlab.matmul", (r["algorithm"], r["fallback_reason"])
        assert r["median_ms"] > 0 and r["comm_ms"] >= 0 and r["gemm_ms"] > 0
    two = [r for r in rows if r["gpus"] == 2]
    assert all(r["overlap_efficiency"] is not None and r["scaling_efficiency"] is not None for r in two)
    with Store.open(db, readonly=True) as store:
        stored = store.rows(launch.EXPERIMENT)
    assert len(stored) == len(rows) and {r["backend"] for r in stored} == {"nccl"}


@needs_two
def test_summa_on_a_2x1_grid(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    code = run_cli(["distributed", "--gpus", "2", "--algorithms", "summa", "--grid", "2x1", "--panels", "2",
                    "--sizes", "512", "--reps", "2", "--out", str(out),
                    "--db", str(tmp_path / "r.sqlite")])  # fmt: skip
    assert code == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["grid"] == "2x1" and row["verified"]


@needs_two
@pytest.mark.skipif(importlib.util.find_spec("nvmath") is not None, reason="nvmath-python is installed")
def test_the_cublasmp_baseline_without_nvmath_names_the_extra(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = run_cli(["distributed", "--gpus", "2", "--algorithms", "cublasmp", "--sizes", "512", "--reps", "1",
                    "--db", str(tmp_path / "r.sqlite"), "--work-dir", str(tmp_path / "logs")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "gemmlab[cublasmp]" in err and "rank0.log" in err


@needs_two
@pytest.mark.skipif(importlib.util.find_spec("nvmath") is None, reason="needs nvmath-python (the cublasmp extra)")
def test_the_cublasmp_baseline_verifies(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    code = run_cli(["distributed", "--gpus", "2", "--algorithms", "allgather_gemm,cublasmp", "--sizes", "1024",
                    "--reps", "2", "--out", str(out), "--db", str(tmp_path / "r.sqlite")])  # fmt: skip
    assert code == 0
    assert all(r["verified"] for r in json.loads(out.read_text())["rows"])
