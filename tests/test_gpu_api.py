"""The Python API on the GPU: a user's kernel run, compared and swept from Python."""

from __future__ import annotations

from pathlib import Path

import pytest

import gemmlab.api as lab

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_run_compare_and_sweep_a_users_kernel(tmp_path) -> None:
    mine = lab.kernel(EXAMPLES / "naive_define" / "matmul.toml")
    result = mine.run(256, block=16, reps=3)
    assert result.kernel == "naive_define/matmul" and result.gflops > 0 and result.error <= result.tolerance
    assert result.source.endswith("naive_define/matmul.toml") and "GFLOPS" in result._repr_html_()
    both = lab.run(mine, 256, vs=["tiled"], reps=3)
    assert [r.kernel for r in both.results] == ["naive_define/matmul", "tiled"]
    swept = lab.sweep([mine, "tiled"], sizes=[128, 256], blocks=[16], db=tmp_path / "lab.sqlite", reps=3)
    assert len(swept.summary.done) == 4 and not swept.summary.failed
    try:
        import pandas  # noqa: F401  (the frame is the optional part; the device machine may lack pandas)
    except ImportError:
        return
    frame = swept.frame()
    assert sorted(set(frame["kernel"])) == ["naive_define/matmul", "tiled"] and (frame["gflops"] > 0).all()
