"""The report's summary from a real sweep of three FP32 rungs: the versions
the run recorded, the best rung against cuBLAS, the chart, and no peak
invented where `gemmlab peak` was not run."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemmlab.core.shapes import Shape
from gemmlab.report import write_report
from gemmlab.store.store import Store
from gemmlab.studies.points import plan
from gemmlab.studies.sweep import sweep

pytestmark = pytest.mark.gpu

RUNGS = ("sgemm_coalesced", "sgemm_smem", "sgemm_warptile")


def test_summary_of_a_ladder_sweep(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    points, refused = plan(RUNGS, [Shape.square(512), Shape.square(1024)], reps=5)
    assert not refused, refused
    with Store.open(db) as store:
        done = sweep(points, store, progress=False, max_seconds=0.5)
        assert not done.failed, done.failed
        rows = store.rows()
    largest = [r for r in rows if r["m"] == 1024]
    best = max(largest, key=lambda r: r["ratio_to_baseline"])
    gpu = rows[0]["gpu_name"]
    text = write_report(db, tmp_path / "out", occupancy=False).read_text()
    assert f"FP32 ladder, float32, on {gpu}: the best kernel at the largest size measured (N = 1024) is " in text
    assert f"is {best['kernel']}, at {best['ratio_to_baseline'] * 100:.0f}% of cuBLAS" in text
    assert f"No measured peak is stored for float32 on {gpu}" in text
    assert "NVRTC not recorded" not in text and "CUDA driver not recorded" not in text
    charts = list((tmp_path / "out").glob("summary_fp32-ladder_*"))
    assert sorted(p.suffix for p in charts) == [".png", ".svg"]
