"""`gemmlab grade --profile` without a GPU: the shape a task profiles at, the
profile stored with the verdict of each timed submission only, the reason
stored when Nsight Compute is missing, the v12 migration, the option on the
command line and the Profile section of a submission's page."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import database_at
from gemmlab.core.errors import VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.measure import ncu
from gemmlab.measure.ncu.metrics import ProfileResult
from gemmlab.measure.watchdog import KernelStopped
from gemmlab.report.leaderboard import bound_by, page_link, profile_html, write_leaderboard
from gemmlab.store.records import Grade
from gemmlab.store.store import SCHEMA_VERSION, Store
from gemmlab.studies import grade
from gemmlab.studies.grade import FAIL, GRADED, PROFILE_FIGURES
from test_grade import EXAMPLES, TASK, Fakes, class_of, cli_class, write_task

FIGURES = {"time_ms": 0.125, "gflops": 268.4, "achieved_occupancy": 61.5, "theoretical_occupancy": 66.7,
           "sm_throughput_pct": 41.0, "dram_throughput_pct": 78.5, "dram_gbs": 2900.0,
           "arithmetic_intensity": 10.7, "tensor_pipe_pct": None}  # fmt: skip
PROFILED = {"shape": [256, 256, 256], "dtype": "float32", "kernel": "ann/matmul", "block_edge": 16,
            "device": "Test GPU", "figures": FIGURES}  # fmt: skip


class InlineWorker:
    """The watchdog's Worker.call, run in this process and recorded; ``raises``: what the call raises instead."""

    def __init__(self, raises: Exception | None = None) -> None:
        self.calls: list[tuple[str, float, tuple, dict]] = []
        self.raises = raises

    def call(self, label: str, limit_s: float, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((label, limit_s, args, kwargs))
        if self.raises is not None:
            raise self.raises
        return fn(*args, **kwargs)


# -- the task ---------------------------------------------------------------------


def test_the_profiled_shape_is_the_largest_public_one_unless_the_task_names_one(tmp_path: Path) -> None:
    assert grade.load_task(write_task(tmp_path)).profiled_shape == Shape.square(256)
    named = TASK.replace('dtypes = ["float32"]', 'dtypes = ["float32"]\nprofile_shape = [128, 64, 32]')
    assert grade.load_task(write_task(tmp_path, named)).profiled_shape == Shape(128, 64, 32)
    hidden = TASK.replace('dtypes = ["float32"]', 'dtypes = ["float32"]\nprofile_shape = 512')
    with pytest.raises(grade.TaskError, match="profile_shape = 512 is not one of the public shapes") as caught:
        grade.load_task(write_task(tmp_path, hidden))
    assert "shapes" in caught.value.fix


# -- the stage ---------------------------------------------------------------------


def one_submission(tmp_path: Path) -> tuple[grade.Submission, grade.Task]:
    (sub,) = grade.find_submissions([EXAMPLES / "naive_define"])
    return sub, grade.load_task(write_task(tmp_path, TASK + "[timing]\ntimeout = 20\n"))


def test_without_ncu_the_profile_says_why_and_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real stage and the real profiler, with ncu nowhere to be found: the
    submission keeps a record of where it would have been profiled and why not."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(ncu.command, "NCU_SEARCH_GLOBS", ())
    sub, task = one_submission(tmp_path)
    worker = InlineWorker()
    record = grade.profile_stage(sub, task, worker)
    assert record["shape"] == [256, 256, 256] and record["dtype"] == "float32"
    assert "Nsight Compute (ncu) was not found" in record["error"] and "Install it" in record["fix"]
    assert "figures" not in record
    ((label, limit, args, _),) = worker.calls
    assert label == "naive_define (profile at 256)"
    # ncu gets the step's timeout; the worker's call a margin more, so ncu's own message ends a slow profile.
    assert args[-1] == task.call_limit() == 20.0 and limit == 20.0 + grade.PROFILE_MARGIN_S


def test_a_profile_keeps_the_figures_the_page_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple] = []

    def fake_profile_point(kernel_id: str, shape: Shape, block_edge: Any, dtype: str, *, timeout: float):
        seen.append((kernel_id, shape, block_edge, dtype, timeout))
        figures = {**FIGURES, "gips": 12.0, "cgma_measured": 3.0}
        return ProfileResult("naive_define/matmul", shape.m, shape.n, shape.k, 32, dtype, (8, 8, 1), (32, 32, 1),
                             figures, device="Test GPU")  # fmt: skip

    monkeypatch.setattr(ncu.command, "profile_point", fake_profile_point)
    sub, task = one_submission(tmp_path)
    record = grade.profile_stage(sub, task, InlineWorker())
    # The timed point: the kernel's own block edge (None: its default), the task's first dtype.
    assert seen == [(str(sub.kernel), Shape.square(256), None, "float32", 20.0)]
    assert record["kernel"] == "naive_define/matmul" and record["block_edge"] == 32
    assert set(record["figures"]) == set(PROFILE_FIGURES) and "gips" not in record["figures"]
    assert record["figures"]["achieved_occupancy"] == 61.5
    json.dumps(record)  # what the grades table stores


def test_a_profile_that_hangs_costs_the_profile_only(tmp_path: Path) -> None:
    sub, task = one_submission(tmp_path)
    hang = KernelStopped("hang", "hang: naive_define (profile) gave no answer within 50 s; its process was killed.")
    record = grade.profile_stage(sub, task, InlineWorker(raises=hang))
    assert record["error"].startswith("hang:") and record["shape"] == [256, 256, 256]


# -- grading with --profile --------------------------------------------------------


class FakeProfiles:
    """profile_stage replaced: records who was profiled, gives PROFILED."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.profiled: list[str] = []
        monkeypatch.setattr(grade.stages, "profile_stage", self)

    def __call__(self, submission: grade.Submission, task: grade.Task, worker: Any) -> dict:
        self.profiled.append(submission.name)
        return {**PROFILED, "kernel": f"{submission.name}/matmul"}


def test_only_timed_submissions_are_profiled_and_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Fakes(monkeypatch, fail={"bob": ("verify", VerificationError("wrong result at hidden shape 1"))},
          speed={"ann": 0.6})  # fmt: skip
    profiles = FakeProfiles(monkeypatch)
    task = grade.load_task(write_task(tmp_path))
    folder = class_of(tmp_path, "ann", "bob", "cy")
    subs = grade.find_submissions([folder])
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        plain = grade.grade(subs[2:], task, store)  # cy, without --profile
        summary = grade.grade(subs[:2], task, store, profile=True)
        rows = {r.submission: r for r in store.grades("t")}
    assert profiles.profiled == ["ann"] and plain.graded[0].profile is None
    verdicts = {v.submission: v for v in summary.graded}
    assert verdicts["ann"].stage == GRADED and verdicts["ann"].grade == "A"  # a profile never changes a grade
    assert json.loads(rows["ann"].profile) == {**PROFILED, "kernel": "ann/matmul"}
    assert rows["bob"].profile is None and rows["bob"].grade == FAIL and rows["cy"].profile is None
    with Store.open(db) as store:  # a second run resumes: nothing is graded or profiled again
        again = grade.grade(subs, task, store, profile=True)
    assert len(again.skipped) == 3 and profiles.profiled == ["ann"]


def test_a_v11_file_gains_the_profile_column_and_keeps_its_grades(tmp_path: Path) -> None:
    path = tmp_path / "v11.db"
    conn = database_at(path, 11)
    conn.execute("INSERT INTO grades (task, submission, attempt, source_hash, stage, grade, created, wall_s) "
                 "VALUES ('t', 'ann', 1, 'h', 'graded', 'A', 'then', 3.5)")  # fmt: skip
    conn.commit()
    conn.close()
    with Store.open(path, readonly=True) as store:  # read as it is
        (old,) = store.grades("t")
        assert store.schema_version == 11 and old.profile is None and old.wall_s == 3.5
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 14 and store.integrity_check() == "ok"
        (old,) = store.grades("t")
        assert old.profile is None and old.wall_s == 3.5
        row = {"task": "t", "submission": "ann", "source_hash": "h2", "path": "p", "stage": GRADED, "reason": None,
               "share_geomean": 0.5, "grade": "A", "profile": json.dumps(PROFILED)}  # fmt: skip
        assert store.add_grade(None, row) == 2
        assert json.loads(store.grades("t")[-1].profile)["figures"] == FIGURES


# -- the command line ----------------------------------------------------------------


def test_cli_profile_option_without_ncu_warns_and_grades(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from gemmlab.cli import run_cli

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(ncu.command, "NCU_SEARCH_GLOBS", ())
    # The real profile stage, run in this process: a worker's child would not see the patched search folders.
    monkeypatch.setattr(grade.stages.watchdog, "Worker", InlineWorkerContext)
    folder = cli_class(monkeypatch, tmp_path, "bob")
    shutil.copytree(EXAMPLES / "naive_define", folder / "ann")  # a declaration the profiler can read
    out = tmp_path / "lb"
    args = ["grade", str(folder), "--task", str(write_task(tmp_path)), "--db", str(tmp_path / "r.db"),
            "--out", str(out), "--profile"]  # fmt: skip
    assert run_cli(args) == 0
    captured = capsys.readouterr()
    assert "--profile: Nsight Compute (ncu) was not found" in " ".join(captured.err.split())
    assert "ann: 0.300 of cuBLAS, grade B" in captured.out and "no profile (its page says why)" in captured.out
    page = (out / page_link("ann")).read_text()
    assert "No profile at 256x256x256 (float32): Nsight Compute (ncu) was not found" in page
    assert "Not profiled: only a kernel that passed" in (out / page_link("bob")).read_text()
    assert "Isolation in force: each submission graded by workers of its own" in (out / "leaderboard.html").read_text()


class InlineWorkerContext(InlineWorker):
    """InlineWorker as `staged` opens its workers (with the environment they would start in, ignored here)."""

    def __init__(self, environment: dict | None = None) -> None:
        super().__init__()

    def __enter__(self) -> InlineWorkerContext:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_the_grade_command_lists_the_option() -> None:
    from typer.testing import CliRunner

    from gemmlab.cli.app import app

    result = CliRunner().invoke(app, ["grade", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--profile" in result.output and "Nsight Compute" in result.output


# -- the page ---------------------------------------------------------------------------


def graded_row(profile: dict | None, stage: str = GRADED) -> Grade:
    return Grade(task="t", submission="ann", attempt=1, source_hash="h", stage=stage,
                 reason=None if stage == GRADED else "verify: x", share_geomean=0.4 if stage == GRADED else None,
                 grade="B" if stage == GRADED else FAIL, path="/c/ann/matmul.toml", wall_s=9.0,
                 profile=json.dumps(profile) if profile else None, created="2026-11-24T00:00:00Z")  # fmt: skip


def test_a_page_shows_the_profile_as_a_table(tmp_path: Path) -> None:
    write_leaderboard(tmp_path, "t", [graded_row(PROFILED)])
    page = (tmp_path / page_link("ann")).read_text()
    section = page.split("<h2>Profile (Nsight Compute): ann/matmul at 256x256x256 (float32), block edge 16, "
                         "on Test GPU</h2>")[1].split("</table>")[0]  # fmt: skip
    assert "<td>achieved occupancy [%]</td><td>61.50</td>" in section
    assert "<td>SM throughput [% of peak]</td><td>41.00</td>" in section
    assert "<td>DRAM bandwidth [GB/s]</td><td>2,900.00</td>" in section
    assert "<td>bound by</td><td>memory (DRAM throughput nearer its peak)</td>" in section
    assert "tensor pipe" not in section  # no value: not a row


def test_a_page_without_a_profile_says_why() -> None:
    missing = {"shape": [256, 256, 256], "dtype": "float32", "error": "ncu was not <found>.", "fix": "Install it."}
    text = profile_html(json.dumps(missing), passed=True)
    assert "No profile at 256x256x256 (float32): ncu was not &lt;found&gt;." in text and "Fix: Install it." in text
    assert "graded without --profile" in profile_html(None, passed=True)
    assert "only a kernel that passed verification and was timed" in profile_html(None, passed=False)


def test_what_bounds_a_launch() -> None:
    assert bound_by({"sm_throughput_pct": 85.0, "dram_throughput_pct": 30.0}).startswith("compute")
    assert bound_by({"sm_throughput_pct": 20.0, "dram_throughput_pct": 90.0}).startswith("memory")
    assert bound_by({"sm_throughput_pct": 20.0, "dram_throughput_pct": 35.0}).startswith("latency")
    assert bound_by({"sm_throughput_pct": 85.0, "dram_throughput_pct": None}) is None
