"""examples/grading/class_demo.py without a GPU: the class it generates (a
mix of every kind, declarations gemmlab reads, compile errors where meant)
and the summary it prints from the grades rows."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from gemmlab.core.shapes import Shape
from gemmlab.kernels import user
from gemmlab.store.store import Store

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("class_demo", ROOT / "examples" / "grading" / "class_demo.py")
demo = importlib.util.module_from_spec(_SPEC)
sys.modules["class_demo"] = demo  # registered while it runs, as an import would: its dataclasses look it up
_SPEC.loader.exec_module(demo)  # type: ignore[union-attr]


def test_forty_submissions_of_every_kind(tmp_path: Path) -> None:
    made = demo.generate(tmp_path, 40)
    assert len(made) == 40 and len(list(tmp_path.iterdir())) == 40
    counts = {k.name: sum(1 for m in made.values() if m == k) for k in demo.KINDS}
    assert counts == {k.name: k.count for k in demo.KINDS}
    sources = {(tmp_path / n / "matmul.cu").read_text() for n in made}
    assert len(sources) >= 20  # built from templates, but not forty copies of six files


def test_a_smaller_class_keeps_every_kind(tmp_path: Path) -> None:
    made = demo.generate(tmp_path, 12)
    assert len(made) == 12 and {m.name for m in made.values()} == {k.name for k in demo.KINDS}


def test_every_declaration_reads_and_takes_the_task_shapes(tmp_path: Path) -> None:
    made = demo.generate(tmp_path, 12)
    for name in made:
        spec = user.load(tmp_path / name / "matmul.toml")
        assert spec.violations(Shape(512, 256, 320), spec.block_edges[0], "float32") == [], name


def test_the_compile_errors_fail_nvrtc_and_the_others_compile(tmp_path: Path) -> None:
    pytest.importorskip("cuda.core")
    from gemmlab.backends.nvrtc import compile_kernel
    from gemmlab.core.errors import CompileError

    made = demo.generate(tmp_path, 12)
    for name, kind in made.items():
        spec = user.load(tmp_path / name / "matmul.toml")
        if kind.name == "compile-error":
            with pytest.raises(CompileError, match=r"matmul\.cu\(\d+\)"):
                compile_kernel(spec, spec.block_edges[0], "float32", "sm_90", use_cache=False)
        else:
            assert compile_kernel(spec, spec.block_edges[0], "float32", "sm_90", use_cache=False).cubin, name


def grade_row(stage: str, grade: str = "fail", share: float | None = None, wall: float = 2.0) -> dict:
    return {"stage": stage, "grade": grade, "share_geomean": share, "wall_s": wall, "occupancy": json.dumps({})}


def test_the_summary_counts_outcomes_and_names_the_unexpected(tmp_path: Path) -> None:
    made = demo.generate(tmp_path, 12)
    expected = {"correct-slow": grade_row("graded", "C", 0.08), "correct-fast": grade_row("graded", "A", 0.6, 4.0),
                "uncoalesced": grade_row("graded", "C", 0.03),
                "wrong": grade_row("verify"), "compile-error": grade_row("compile"),
                "fault": grade_row("sanitize"), "hang": grade_row("verify", wall=20.0)}  # fmt: skip
    grades = {name: expected[kind.name] for name, kind in made.items()}
    text, unexpected = demo.summary(made, grades, 30.0, "local")
    assert unexpected == 0 and "12 of 12 graded in 30 s" in text and "UNEXPECTED" not in text
    assert "hang: " in text and "correct-fast: 0.600 to 0.600 of cuBLAS" in text and "UNEXPECTED order" not in text
    slow = next(n for n, k in made.items() if k.name == "correct-slow")
    grades[slow] = grade_row("graded", "A", 0.6)  # as fast as the slowest tiled one: a misranked leaderboard
    text, unexpected = demo.summary(made, grades, 30.0, "local")
    assert unexpected == 1 and "UNEXPECTED order: slowest correct-fast 0.600 <= fastest correct-slow 0.600" in text
    grades[slow] = expected["correct-slow"]
    fault = next(n for n, k in made.items() if k.name == "fault")
    grades[fault] = grade_row("graded", "A", 0.7)
    del grades[next(n for n, k in made.items() if k.name == "hang")]
    text, unexpected = demo.summary(made, grades, 30.0, "cluster")
    assert unexpected == 2 and f"UNEXPECTED {fault}: graded (expected sanitize)" in text and "not graded" in text


def test_the_timing_lines_show_both_sides_and_the_baselines_spread(tmp_path: Path) -> None:
    made = demo.generate(tmp_path / "class", 12)
    db = tmp_path / "local.sqlite"
    store = Store.open(db)
    run_id = store.start_run({})
    store.close()
    fast = next(n for n, k in made.items() if k.name == "correct-fast")
    slow = next(n for n, k in made.items() if k.name == "correct-slow")
    columns = ("run_id, experiment, point_key, kernel, m, n, k, block_edge, dtype, median_ms, baseline_median_ms, "
               "ratio_to_baseline, timing_method, baseline_timing_method, sm_clock_after_mhz, created")  # fmt: skip
    rows = [(run_id, "grade:class-demo", f"{fast}|384", f"{fast}/matmul", 384, 384, 384, 16, "float32", 0.010, 0.020,
             2.0, "CUDA graph of 50 launches", "CUDA graph of 50 launches", 1980.0, "now"),
            (run_id, "grade:class-demo", f"{slow}|384", f"{slow}/matmul", 384, 384, 384, 8, "float32", 0.025, 0.025,
             1.0, "events around each launch", "50 back-to-back launches", None, "now")]  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.executemany(f"INSERT INTO results ({columns}) VALUES ({', '.join('?' * 16)})", rows)
    grades = {fast: grade_row("graded", "A", 2.0), slow: grade_row("graded", "A", 1.0), "x": grade_row("verify")}
    lines = demo.timing_lines(made, grades, demo.timed_rows(db))
    assert any(fast in line and "384x384x384 10.0/20.0=2.00 (graph; graph) 1980" in line for line in lines)
    assert any(slow in line and "25.0/25.0=1.00 (events; back-to-back) -" in line for line in lines)
    assert lines[-1] == "   cuBLAS at 384x384x384: 20.0 to 25.0 us over 2 submissions (max/min 1.25)"
