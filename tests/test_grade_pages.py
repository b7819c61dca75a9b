"""Each submission's page of the leaderboard, and the wall time it took,
without a GPU: grades and results rows as the store gives them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gemmlab.report.leaderboard import page_link, write_leaderboard
from gemmlab.store.records import Grade
from gemmlab.studies.grade import FAIL, GRADED

OCCUPANCY = {"block": [16, 16, 1], "threads_per_block": 256, "regs_per_thread": 40, "smem_requested": 2048,
             "active_blocks": 6, "active_warps": 48, "occupancy": 0.75, "limiting_factors": ["registers"]}  # fmt: skip


def grades() -> list[Grade]:
    rows = [
        {"submission": "ann", "attempt": 1, "stage": GRADED, "reason": None, "share_geomean": 0.41, "grade": "B",
         "path": "/c/ann/matmul.toml", "wall_s": 12.25, "occupancy": json.dumps(OCCUPANCY),
         "created": "2026-11-24T00:00:00Z"},
        {"submission": "bob", "attempt": 1, "stage": "compile", "reason": "compile: matmul.cu(3): error: <oops>",
         "share_geomean": None, "grade": FAIL, "path": "/c/bob/matmul.toml", "wall_s": 1.5, "occupancy": None,
         "created": "2026-11-24T00:01:00Z"},
    ]  # fmt: skip
    return [Grade(task="t", source_hash="h", **row) for row in rows]


def result(m: int, n: int, k: int, ms: float, base_ms: float, source: str = "/c/ann/matmul.toml") -> dict:
    flops = 2 * m * n * k
    return {"kernel": "ann/matmul", "source": source, "m": m, "n": n, "k": k, "block_edge": 16, "config": None,
            "median_ms": ms, "gflops": flops / ms / 1e6, "baseline_gflops": flops / base_ms / 1e6,
            "ratio_to_baseline": base_ms / ms, "error": 1e-7}  # fmt: skip


def test_the_leaderboard_shows_wall_time_and_links_each_page(tmp_path: Path) -> None:
    csv_path, html_path = write_leaderboard(tmp_path, "t", grades())
    with csv_path.open() as handle:
        rows = {r["submission"]: r for r in csv.DictReader(handle)}
    assert rows["ann"]["wall_s"] == "12.2" and rows["bob"]["wall_s"] == "1.5"
    board = html_path.read_text()
    for name in ("ann", "bob"):
        assert f"href='{page_link(name)}'" in board and (tmp_path / page_link(name)).is_file()


def test_a_graded_submissions_page_has_its_times_beside_cublas_and_its_occupancy(tmp_path: Path) -> None:
    results = [result(256, 256, 256, 0.5, 0.1), result(96, 64, 128, 0.02, 0.01),
               result(256, 256, 256, 9.9, 0.1, source="/c/cy/matmul.toml")]  # fmt: skip
    graphed = "CUDA graph of 50 launches"
    results[1].update(timing_method=graphed, baseline_timing_method=graphed)
    write_leaderboard(tmp_path, "t", grades(), results=results, names={(96, 64, 128): "hidden shape 1"})
    page = (tmp_path / page_link("ann")).read_text()
    assert "grade <b>B</b>; 0.410 of cuBLAS" in page and "graded in 12.2 s" in page
    table = page.split("Time beside cuBLAS")[1].split("</table>")[0]
    assert "hidden shape 1" in table and "96x64x128" not in page and "50.0%" in table and "20.0%" in table
    assert "9.9000" not in table  # another submission's result
    # How each side was timed, beside the figures: the short shape from graphs on both sides.
    assert "timed by (kernel; cuBLAS)" in table and f"<td>{graphed}; {graphed}</td></tr>" in table
    assert "<td>20.0%</td><td>1.0e-07</td><td>-</td></tr>" in table  # a row stored without its methods
    occupancy = page.split("Occupancy (theoretical")[1]
    assert "16 x 16 x 1" in occupancy and "75%" in occupancy and "registers" in occupancy


def test_a_failed_submissions_page_shows_why_with_the_compile_log(tmp_path: Path) -> None:
    write_leaderboard(tmp_path, "t", grades(), results=[result(256, 256, 256, 0.5, 0.1, "/c/bob/matmul.toml")])
    page = (tmp_path / page_link("bob")).read_text()
    assert "Stopped at the compile stage" in page and "matmul.cu(3): error: &lt;oops&gt;" in page
    assert "Time beside cuBLAS" not in page and "Not known" in page


def test_shares_whose_intervals_overlap_are_marked_within_noise() -> None:
    """Issue 48: a leaderboard says when two ranked shares are not told apart."""
    from gemmlab.report.leaderboard import mark_noise, share_interval

    assert share_interval([{"ratio_low": 0.5, "ratio_high": 0.6}, {"ratio_low": 2.0, "ratio_high": 2.4}]) == (
        pytest.approx(1.0),
        pytest.approx((0.6 * 2.4) ** 0.5),
    )
    assert share_interval([{"ratio_low": 0.5, "ratio_high": 0.6}, {"ratio_low": None, "ratio_high": None}]) is None
    rows = [
        {"rank": 1, "submission": "a", "share_interval": (1.10, 1.20), "noise": ""},
        {"rank": 2, "submission": "b", "share_interval": (1.05, 1.12), "noise": ""},
        {"rank": 3, "submission": "c", "share_interval": (0.50, 0.60), "noise": ""},
        {"rank": None, "submission": "d", "share_interval": None, "noise": ""},
    ]
    mark_noise(rows)
    assert [r["noise"] for r in rows] == ["within noise of b", "", "", ""]


def test_a_submissions_page_lists_the_kernels_its_timed_calls_ran() -> None:
    from gemmlab.report.leaderboard import submission_page

    row = Grade(task="t", submission="ann", attempt=1, source_hash="h", grade="A", share_geomean=0.9, stage="graded",
                wall_s=3.0, path="ann/matmul.py", created="now")  # fmt: skip
    results = [{"m": 64, "n": 64, "k": 64, "kernel": "ann/matmul", "kernels_seen": ["my_gemm", "my_epilogue"],
                "median_ms": 1.0, "gflops": 1.0, "ratio_to_baseline": 0.9, "error": 0.0, "block_edge": 0,
                "dtype": "float32", "metric": "gflops"}]  # fmt: skip
    page = submission_page("t", row, [row], results)
    assert "Kernels the timed calls ran" in page and "<code>my_gemm</code>" in page and "my_epilogue" in page
