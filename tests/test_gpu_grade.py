"""`gemmlab grade` on the GPU: a small class of the examples, each stopped at
the stage that should catch it, the passing ones timed beside cuBLAS.

Skipped without a GPU (conftest), and without compute-sanitizer (the stage
every submission goes through). The slow test adds the examples whose catching
stage may vary and the kernel that hangs (a minute under the sanitizer). The
profile test (`--profile`) skips without Nsight Compute, or where it may not
read the GPU's counters.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from conftest import needs_tool
from gemmlab.measure.ncu.command import find_ncu
from gemmlab.measure.sanitize import find_sanitizer
from gemmlab.report.leaderboard import page_link, standings, write_leaderboard
from gemmlab.store.store import Store
from gemmlab.studies import grade
from gemmlab.studies.grade import FAIL, GRADED

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# Square shapes, sides multiples of 32: naive_define (and the faulty kernels
# without bounds checks) take only those.
TASK = """
name = "gpu-test"
problem = "matmul"
dtypes = ["float32"]
shapes = [256]
[hidden]
count = 2
seed = 5
min = 128
max = 512
multiple = 32
square = true
[grades]
A = 0.5
B = 0.1
pass = "verified"
[timing]
reps = 5
max_seconds = 1.0
timeout = 120
"""


pytestmark = [pytest.mark.gpu, needs_tool(find_sanitizer, "compute-sanitizer")]


def a_class(tmp_path: Path, *names: str) -> Path:
    """The examples named, each copied into a student's folder of the class,
    each declaring one tile edge: the sanitizer checks every declared edge, and
    one is what a student hands in."""
    folder = tmp_path / "class"
    for name in names:
        source = EXAMPLES / name
        shutil.copytree(source, folder / source.name)
        declaration = folder / source.name / "matmul.toml"
        declaration.write_text(declaration.read_text().replace("TILE = [16, 8, 32]", "TILE = [32]"))
    return folder


def graded(
    tmp_path: Path, *names: str, profile: bool = False, task_text: str = TASK
) -> tuple[dict[str, grade.Verdict], grade.Task, Path]:
    task_path = tmp_path / "task.toml"
    task_path.write_text(task_text)
    task = grade.load_task(task_path)
    db = tmp_path / "results.db"
    with Store.open(db) as store:
        summary = grade.grade(grade.find_submissions([a_class(tmp_path, *names)]), task, store, profile=profile)
    assert not summary.errors, summary.errors
    return {v.submission: v for v in summary.graded}, task, db


def test_a_class_is_graded_stage_by_stage(tmp_path: Path) -> None:
    names = ("naive_define", "tiled_template", "broken", "faulty/fault", "faulty/cached_answer", "faulty/missing_sync")
    verdicts, task, db = graded(tmp_path, *names)
    assert set(verdicts) == {"naive_define", "tiled_template", "broken", "fault", "cached_answer", "missing_sync"}

    for name in ("naive_define", "tiled_template"):
        v = verdicts[name]
        assert v.stage == GRADED and v.reason is None, v.reason
        assert len(v.shares) == len(task.shapes) == 3 and all(s > 0 for s in v.shares.values())
        assert v.grade == grade.grade_of(v.share_geomean, task.thresholds) != FAIL
    assert verdicts["broken"].stage == "compile"
    assert "matmul.cu(11)" in verdicts["broken"].reason  # the student's own line
    assert verdicts["fault"].stage == "sanitize" and "memcheck" in verdicts["fault"].reason
    assert verdicts["missing_sync"].stage == "sanitize"
    # Its answer is right for the inputs it first saw: only fresh inputs catch it.
    assert verdicts["cached_answer"].stage == "verify", verdicts["cached_answer"].reason
    assert "hidden shape" in verdicts["cached_answer"].reason
    assert not any(f"on {s}" in verdicts["cached_answer"].reason for s in task.hidden)

    with Store.open(db) as store:
        rows = store.rows(task.experiment)
        assert {(r["kernel"], r["m"]) for r in rows} == {
            (f"{name}/matmul", s.m) for name in ("naive_define", "tiled_template") for s in task.shapes
        }
        paths = write_leaderboard(tmp_path / "out", task.name, store.grades(task.name), task.thresholds)
        ranked = standings(store.grades(task.name))
    assert {r["submission"] for r in ranked[:2]} == {"naive_define", "tiled_template"}
    assert [r["rank"] for r in ranked[:2]] == [1, 2] and ranked[0]["share_geomean"] >= ranked[1]["share_geomean"]
    assert all(r["grade"] == FAIL and r["reason"] for r in ranked[2:])
    with paths[0].open() as handle:
        assert len(list(csv.DictReader(handle))) == 6


@pytest.mark.slow
def test_every_faulty_example_fails(tmp_path: Path) -> None:
    names = ("faulty/accumulate_into_c", "faulty/oob_write", "faulty/lower_precision", "faulty/hang")
    # The hang spins at the sanitizer's shapes too: it is stopped there, after
    # sanitize_timeout (by default 4 x the 120 s step: eight minutes of memcheck).
    verdicts, _, _ = graded(tmp_path, *names, task_text=TASK + "sanitize_timeout = 90\n")
    for name, v in verdicts.items():
        assert v.grade == FAIL and v.stage in ("sanitize", "verify", "time"), (name, v.stage, v.reason)
    assert verdicts["hang"].stage == "sanitize"


# What ncu_failure says when the machine, not the kernel, keeps the counters from ncu.
MACHINE_REFUSALS = ("performance counters", "cannot profile this GPU", "could not start its profiler")


@pytest.mark.xdist_group("ncu")  # one Nsight Compute at a time, as in test_gpu_profile
@needs_tool(find_ncu, "Nsight Compute")
def test_grading_with_profile_stores_plausible_figures(tmp_path: Path) -> None:
    verdicts, task, db = graded(tmp_path, "naive_define", "broken", profile=True)
    v = verdicts["naive_define"]
    assert v.stage == GRADED and v.grade != FAIL, v.reason
    profile = v.profile
    if any(words in profile.get("error", "") for words in MACHINE_REFUSALS):
        pytest.skip(profile["error"])
    assert "error" not in profile, profile
    assert profile["shape"] == [256, 256, 256] and profile["dtype"] == "float32"
    assert profile["kernel"] == "naive_define/matmul" and profile["block_edge"] == 32
    figures = profile["figures"]
    assert set(figures) == set(grade.PROFILE_FIGURES)
    # Percentages of the SM's warp slots and of each unit's peak.
    assert 0 < figures["achieved_occupancy"] <= figures["theoretical_occupancy"] + 1e-6 <= 100 + 1e-6
    assert 0 < figures["sm_throughput_pct"] <= 100 and 0 <= figures["dram_throughput_pct"] <= 100
    # ncu flushes the caches before each pass, so the inputs come from DRAM.
    assert figures["dram_gbs"] > 0 and figures["time_ms"] > 0 and figures["gflops"] > 0
    assert figures["tensor_pipe_pct"] in (None, 0) or figures["tensor_pipe_pct"] < 1  # naive uses no tensor core
    assert verdicts["broken"].profile is None  # stopped at compile: nothing to profile

    with Store.open(db) as store:
        rows = {r.submission: r for r in store.grades(task.name)}
        write_leaderboard(tmp_path / "out", task.name, store.grades(task.name), task.thresholds)
    assert json.loads(rows["naive_define"].profile) == profile and rows["broken"].profile is None
    page = (tmp_path / "out" / page_link("naive_define")).read_text()
    assert "<h2>Profile (Nsight Compute): naive_define/matmul at 256x256x256 (float32)" in page
    assert "achieved occupancy [%]" in page and "<td>bound by</td>" in page
