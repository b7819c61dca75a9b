"""`gemmlab grade` without a GPU: the task file, hidden shapes, grades, the
stages' order (with fake stages), the stored attempts and the leaderboard."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pytest

from conftest import database_at
from gemmlab.backends.nvrtc import Resources
from gemmlab.core.errors import CompileError, GemmlabError, NoGPUError, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.measure.run import RunResult
from gemmlab.report.leaderboard import standings, write_leaderboard
from gemmlab.store.records import Grade
from gemmlab.store.store import SCHEMA_VERSION, Store
from gemmlab.studies import grade
from gemmlab.studies.grade import FAIL, GRADED, Hidden, TaskError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "grading" / "task.toml"

TASK = """
name = "t"
problem = "matmul"
dtypes = ["float32"]
shapes = [256, [128, 64, 32]]
[hidden]
count = 2
seed = 7
min = 64
max = 256
multiple = 32
[grades]
A = 0.5
B = 0.25
pass = "verified"
"""


def write_task(tmp_path: Path, text: str = TASK) -> Path:
    path = tmp_path / "task.toml"
    path.write_text(text)
    return path


def test_the_example_task_reads() -> None:
    task = grade.load_task(EXAMPLE)
    assert task.problem == "matmul" and task.dtypes == ("float32",)
    assert task.public == (Shape.square(1024), Shape(2048, 1024, 512))
    assert len(task.hidden) == 3 and task.shapes == task.public + task.hidden
    assert [name for name, _ in task.thresholds] == ["A", "B", "C", "pass"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (('problem = "matmul"', 'problem = "conv"'), "problem"),
        (('dtypes = ["float32"]', 'dtypes = ["float33"]'), "float33"),
        (("shapes = [256, [128, 64, 32]]", "shapes = [256, [128, 64]]"), "shapes"),
        (("shapes = [256, [128, 64, 32]]", "shapes = [256, 256]"), "twice"),
        (("shapes = [256, [128, 64, 32]]", "shapes = []"), "shapes"),
        (("seed = 7\n", ""), "seed"),
        (("multiple = 32", "multiple = 300"), "multiple of 300"),
        (("A = 0.5", "A = -1"), "grades.A"),
        (('pass = "verified"', 'pass = "sometimes"'), "grades.pass"),
        (("[grades]", "colour = 1\n[grades]"), "hidden"),
        (('name = "t"', 'name = "t"\ncolour = 1'), "unknown key colour"),
        (('name = "t"', "name = [1"), "not valid TOML"),
    ],
)
def test_a_bad_task_is_refused_naming_the_key(tmp_path: Path, change: tuple[str, str], named: str) -> None:
    old, new = change
    assert old in TASK
    with pytest.raises(TaskError) as caught:
        grade.load_task(write_task(tmp_path, TASK.replace(old, new, 1)))
    assert named in str(caught.value) and caught.value.fix


def test_a_missing_task_or_grades_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not found"):
        grade.load_task(tmp_path / "none.toml")
    no_grades = TASK.split("[grades]")[0]
    with pytest.raises(TaskError, match=r"\[grades\] is missing"):
        grade.load_task(write_task(tmp_path, no_grades))


def test_hidden_shapes_come_from_the_seed_alone() -> None:
    public = (Shape.square(256),)
    rule = Hidden(count=5, seed=11, low=64, high=512, multiple=32)
    first, again = grade.hidden_shapes(rule, public), grade.hidden_shapes(rule, public)
    assert first == again and len(first) == 5 and len(set(first)) == 5
    assert not set(first) & set(public)
    assert all(64 <= side <= 512 and side % 32 == 0 for s in first for side in (s.m, s.n, s.k))
    other = grade.hidden_shapes(Hidden(count=5, seed=12, low=64, high=512, multiple=32), public)
    assert other != first


def test_square_hidden_shapes_skip_the_public_ones() -> None:
    # Only 64, 96 and 128 fit, and 96 is public: two shapes are left to draw.
    rule = Hidden(count=5, seed=3, low=64, high=128, multiple=32, square=True)
    shapes = grade.hidden_shapes(rule, (Shape.square(96),))
    assert sorted(s.m for s in shapes) == [64, 128] and all(s.is_square for s in shapes)


def test_grades_follow_the_thresholds() -> None:
    bars = (("A", 0.5), ("B", 0.25), ("pass", None))
    assert grade.grade_of(0.7, bars) == "A"
    assert grade.grade_of(0.5, bars) == "A"
    assert grade.grade_of(0.3, bars) == "B"
    assert grade.grade_of(0.01, bars) == "pass"
    assert grade.grade_of(0.01, (("A", 0.5),)) == FAIL


def test_the_geometric_mean() -> None:
    assert grade.geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert grade.geomean([0.1, 0.4]) == pytest.approx(0.2)
    assert grade.geomean([3.0]) == pytest.approx(3.0)
    assert grade.geomean([]) is None
    with pytest.raises(ValueError):
        grade.geomean([1.0, 0.0])


# -- the stages, faked ------------------------------------------------------------


def result(kernel: str, shape: Shape, share: float) -> RunResult:
    return RunResult(
        kernel=kernel, m=shape.m, n=shape.n, k=shape.k, block_edge=16, dtype="float32", grid=(1, 1, 1),
        block=(16, 16, 1), dynamic_smem=0, resources=Resources(32, 0, 0, 0, 0, 1), arch="sm_90",
        timing=Timing(1.0, 1.0, 1.0, 5), gflops=1.0, gbytes_per_s=1.0, error=0.0, tolerance=1e-5,
        baseline_name="cuBLAS", baseline_timing=Timing(share, share, share, 5), ratio_to_baseline=share,
    )  # fmt: skip


class Fakes:
    """Stage functions that record their calls; ``fail`` maps a submission's
    name to (stage, exception); ``speed`` maps it to its share of cuBLAS."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail: dict | None = None, speed: dict | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail, self.speed = fail or {}, speed or {}
        for stage in grade.STAGES:
            monkeypatch.setattr(grade.stages, f"{stage}_stage", self.stage(stage))

    def stage(self, name: str):
        def run(submission, task, worker):
            self.calls.append((submission.name, name))
            where, exc = self.fail.get(submission.name, (None, None))
            if where == name:
                raise exc
            if name == "time":
                share = self.speed.get(submission.name, 0.3)
                return [result(f"{submission.name}/matmul", s, share) for s in task.shapes]
            return None

        return run


def class_of(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "class"
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "matmul.toml").write_text(f"# {name}\n")
        (folder / name / "matmul.cu").write_text(f"// {name}\n")
    return folder


def test_a_compile_failure_stops_before_the_sanitizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, fail={"ann": ("compile", CompileError("matmul.cu(12): error: expected a ';'"))})
    task = grade.load_task(write_task(tmp_path))
    (sub,) = grade.find_submissions([class_of(tmp_path, "ann") / "ann"])
    verdict = grade.grade_one(sub, task)
    assert fakes.calls == [("ann", "compile")]
    assert verdict.stage == "compile" and verdict.grade == FAIL
    assert "matmul.cu(12)" in verdict.reason and verdict.share_geomean is None


def test_a_sanitizer_finding_stops_before_timing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    finding = grade.StageFailed("compute-sanitizer memcheck: 1 report(s): Invalid __global__ write of size 4")
    fakes = Fakes(monkeypatch, fail={"bob": ("sanitize", finding)})
    task = grade.load_task(write_task(tmp_path))
    (sub,) = grade.find_submissions([class_of(tmp_path, "bob") / "bob"])
    verdict = grade.grade_one(sub, task)
    assert fakes.calls == [("bob", "compile"), ("bob", "sanitize")]
    assert verdict.stage == "sanitize" and "Invalid __global__ write" in verdict.reason


def test_a_wrong_result_is_failed_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = VerificationError("wrong result: 96 elements of C never written", "Write every element of C.")
    fakes = Fakes(monkeypatch, fail={"cy": ("verify", wrong)})
    task = grade.load_task(write_task(tmp_path))
    (sub,) = grade.find_submissions([class_of(tmp_path, "cy") / "cy"])
    verdict = grade.grade_one(sub, task)
    assert ("cy", "time") not in fakes.calls
    assert (verdict.stage, verdict.grade) == ("verify", FAIL)
    # (96 may be a side of a hidden shape: a number that is one is scrubbed from a reason, whatever it counts)
    assert verdict.reason.startswith("verify: wrong result: ") and "elements of C never written" in verdict.reason


def test_a_passing_submission_gets_its_geomean_and_grade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(monkeypatch, speed={"di": 0.3})
    task = grade.load_task(write_task(tmp_path))
    (sub,) = grade.find_submissions([class_of(tmp_path, "di") / "di"])
    verdict = grade.grade_one(sub, task)
    assert [stage for _, stage in fakes.calls] == list(grade.STAGES)
    assert verdict.stage == GRADED and verdict.reason is None
    assert len(verdict.shares) == len(task.shapes) == 4
    assert verdict.share_geomean == pytest.approx(0.3) and verdict.grade == "B"


def test_no_gpu_is_not_a_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Fakes(monkeypatch, fail={"ed": ("compile", NoGPUError("no CUDA driver"))})
    task = grade.load_task(write_task(tmp_path))
    subs = grade.find_submissions([class_of(tmp_path, "ed")])
    with Store.open(tmp_path / "r.db") as store:
        summary = grade.grade(subs, task, store)
        assert summary.errors and "no CUDA driver" in summary.errors[0][1] and not summary.graded
        assert store.grades("t") == []


# -- many submissions: storing, resuming, the leaderboard -----------------------


def test_a_class_is_stored_ranked_and_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fakes = Fakes(
        monkeypatch,
        fail={"bob": ("sanitize", grade.StageFailed("racecheck: 2 report(s)")),
              "cy": ("verify", VerificationError("wrong result at hidden shape 1"))},
        speed={"ann": 0.6, "di": 0.3, "eve": 0.02},
    )  # fmt: skip
    task = grade.load_task(write_task(tmp_path))
    folder = class_of(tmp_path, "ann", "bob", "cy", "di", "eve")
    subs = grade.find_submissions([folder])
    assert [s.name for s in subs] == ["ann", "bob", "cy", "di", "eve"]
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION
        summary = grade.grade(subs, task, store)
        assert len(summary.graded) == 5 and not summary.skipped
        timed = store.rows(task.experiment)
        assert len(timed) == 3 * len(task.shapes)  # the three that passed, one row per shape
        rows = standings(store.grades("t"))
    assert [(r["rank"], r["submission"], r["grade"]) for r in rows] == [
        (1, "ann", "A"), (2, "di", "B"), (3, "eve", "pass"), (None, "cy", FAIL), (None, "bob", FAIL),
    ]  # fmt: skip
    assert rows[3]["reason"].startswith("verify: wrong result") and rows[4]["stage"] == "sanitize"

    calls = len(fakes.calls)
    with Store.open(db) as store:
        again = grade.grade(subs, task, store)
    assert len(again.skipped) == 5 and not again.graded and len(fakes.calls) == calls

    (folder / "cy" / "matmul.cu").write_text("// cy, fixed\n")
    fakes.fail.pop("cy")
    fakes.speed["cy"] = 0.2
    with Store.open(db) as store:
        fixed = grade.grade(grade.find_submissions([folder]), task, store)
        assert [v.submission for v in fixed.graded] == ["cy"] and len(fixed.skipped) == 4
        history = [(g.attempt, g.stage) for g in store.grades("t") if g.submission == "cy"]
        assert history == [(1, "verify"), (2, GRADED)]
        forced = grade.grade(subs[:1], task, store, force=True)
        assert [v.submission for v in forced.graded] == ["ann"]
        rows = standings(store.grades("t"))
    by_name = {r["submission"]: r for r in rows}
    assert by_name["cy"]["attempts"] == 2 and by_name["cy"]["rank"] == 3 and by_name["ann"]["attempts"] == 2


def test_the_leaderboard_files(tmp_path: Path) -> None:
    grades = [
        {"submission": "ann", "attempt": 1, "stage": GRADED, "reason": None, "share_geomean": 0.41, "grade": "B",
         "created": "2026-11-24T00:00:00Z"},
        {"submission": "bob", "attempt": 1, "stage": GRADED, "reason": None, "share_geomean": 0.9, "grade": "A",
         "created": "2026-11-24T00:00:00Z"},
        {"submission": "bob", "attempt": 2, "stage": "compile", "reason": "compile: matmul.cu(3): <oops>",
         "share_geomean": None, "grade": FAIL, "created": "2026-11-24T00:01:00Z"},
    ]  # fmt: skip
    grades = [Grade(task="t", source_hash="h", **row) for row in grades]
    csv_path, html_path = write_leaderboard(tmp_path / "out", "t", grades, (("A", 0.5), ("B", 0.25)))
    with csv_path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["rank"], r["submission"], r["grade"], r["attempts"]) for r in rows] == [
        ("1", "ann", "B", "1"),
        ("", "bob", FAIL, "2"),
    ]
    assert rows[0]["share_geomean"] == "0.410" and rows[1]["stage"] == "compile"
    page = html_path.read_text()
    assert "matmul.cu(3): &lt;oops&gt;" in page and "A: 0.5 of cuBLAS" in page
    assert page.index(">ann<") < page.index(">bob<")
    attempts = page.split("<h2>Attempts</h2>")[1]
    assert attempts.count(">bob<") == 2 and attempts.count(">ann<") == 1 and "0.900" in attempts


def test_the_submissions_a_folder_holds(tmp_path: Path) -> None:
    folder = class_of(tmp_path, "ann", "bob")
    (folder / "empty").mkdir()
    subs = {s.name: s for s in grade.find_submissions([folder])}
    assert set(subs) == {"ann", "bob", "empty"} and subs["empty"].kernel is None
    (one,) = grade.find_submissions([folder / "ann" / "matmul.cu"])
    assert one.name == "ann" and one.kernel == (folder / "ann" / "matmul.toml").resolve()
    assert one.source_hash == subs["ann"].source_hash != subs["bob"].source_hash
    (folder / "py").mkdir()
    (folder / "py" / "matmul.py").write_text("GEMMLAB = {}\n")
    (folder / "py" / "_helpers.py").write_text("")
    (py,) = grade.find_submissions([folder / "py"])
    assert py.kernel == (folder / "py" / "matmul.py").resolve() and len(py.files) == 2
    (folder / "ann" / "other.toml").write_text("")
    with pytest.raises(GemmlabError, match="more than one kernel"):
        grade.find_submissions([folder / "ann"])
    with pytest.raises(GemmlabError, match="both called bob"):
        grade.find_submissions([folder / "bob", tmp_path / "class" / "bob"])


def test_an_empty_folder_fails_at_compile(tmp_path: Path) -> None:
    task = grade.load_task(write_task(tmp_path))
    (tmp_path / "class" / "gus").mkdir(parents=True)
    (sub,) = [s for s in grade.find_submissions([tmp_path / "class"]) if s.name == "gus"]
    verdict = grade.grade_one(sub, task)
    assert verdict.stage == "compile" and "holds no kernel" in verdict.reason


# -- the command line -------------------------------------------------------------


def one_error_line(capsys: pytest.CaptureFixture, args: list[str]) -> str:
    from gemmlab.cli import run_cli

    code = run_cli(args)
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1, err
    return err


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = class_of(tmp_path, "ann")
    db = str(tmp_path / "r.db")
    err = one_error_line(capsys, ["grade", str(folder), "--task", str(tmp_path / "none.toml"), "--db", db])
    assert "task file" in err and "not found" in err
    (tmp_path / "empty").mkdir()
    err = one_error_line(capsys, ["grade", str(tmp_path / "empty"), "--task", str(EXAMPLE), "--db", db])
    assert "no submission found" in err
    err = one_error_line(capsys, ["grade", str(folder)])
    assert "--task" in err


def test_cli_grades_a_class_and_writes_the_leaderboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from gemmlab.cli import run_cli

    folder = cli_class(monkeypatch, tmp_path, "ann", "bob")
    args = ["grade", str(folder), "--task", str(write_task(tmp_path)), "--db", str(tmp_path / "r.db"),
            "--out", str(tmp_path / "lb")]  # fmt: skip
    assert run_cli(args) == 0
    out = capsys.readouterr().out
    assert "ann: 0.300 of cuBLAS, grade B" in out and "bob: fail at compile" in out
    assert "grading on: inline: one item after another in this process (no Dask)" in out
    rows = list(csv.DictReader((tmp_path / "lb" / "leaderboard.csv").open()))
    assert [r["submission"] for r in rows] == ["ann", "bob"]
    assert run_cli(args) == 0
    out = capsys.readouterr().out
    assert "0 to grade, 2 graded before" in out and "grading on" not in out
    assert math.isfinite(float(rows[0]["share_geomean"]))


def cli_class(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *names: str) -> Path:
    """A class of ``names`` for `gemmlab grade`, graded by fakes in this
    process: ann is timed at 0.3 of cuBLAS, bob fails to compile."""
    from gemmlab.api import grade as grade_api

    Fakes(monkeypatch, fail={"bob": ("compile", CompileError("matmul.cu(7): error"))}, speed={"ann": 0.3})
    monkeypatch.setattr(grade_api, "check_sanitizer", lambda: None)
    monkeypatch.setattr(grade, "pooled", lambda scheduler: _inline())
    return class_of(tmp_path, *names)


def _inline():
    import contextlib

    from gemmlab.studies import scale

    return contextlib.nullcontext(scale.Pool(scheduler=scale.INLINE))


# -- the real compile stage (NVRTC compiles without a GPU) ------------------------

EXAMPLES = ROOT / "examples"


def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU description for compiling in this process: the arch is all a compile reads."""
    from types import SimpleNamespace

    from gemmlab.core import gpu

    monkeypatch.setattr(gpu, "describe", lambda index=0: SimpleNamespace(arch="sm_90"))


def test_a_compile_error_names_the_students_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpu(monkeypatch)
    text = TASK.replace("[hidden]", "[hidden]\nsquare = true").replace(
        "shapes = [256, [128, 64, 32]]", "shapes = [256]"
    )
    task = grade.load_task(write_task(tmp_path, text))
    with pytest.raises(CompileError, match=r"examples/broken/matmul\.cu\(11\): error"):
        grade.compile_on_device(str(EXAMPLES / "broken" / "matmul.toml"), task)


def test_a_kernel_that_refuses_a_hidden_shape_is_not_told_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpu(monkeypatch)
    text = TASK.replace("shapes = [256, [128, 64, 32]]", "shapes = [256]")
    task = grade.load_task(write_task(tmp_path, text))
    assert not any(s.is_square for s in task.hidden)  # naive_define takes square shapes only
    with pytest.raises(grade.StageFailed) as caught:
        grade.compile_on_device(str(EXAMPLES / "naive_define" / "matmul.toml"), task)
    message = str(caught.value)
    assert "refuses hidden shape 1" in message and "multiples of 32 from 64 to 256" in message
    assert not any(f"{s.m}x{s.n}x{s.k}" in message for s in task.hidden)


def test_the_compile_stage_runs_in_the_worker(tmp_path: Path) -> None:
    """The real stages: the declaration is read in the worker, not here, and
    its refusal (the task needs float16) comes back as the verdict."""
    task = grade.load_task(write_task(tmp_path, TASK.replace('dtypes = ["float32"]', 'dtypes = ["float16"]')))
    (sub,) = grade.find_submissions([EXAMPLES / "naive_define"])
    verdict = grade.grade_one(sub, task)
    assert verdict.stage == "compile" and verdict.grade == FAIL
    assert "does not declare dtype float16" in verdict.reason


def test_a_hidden_shape_is_masked_in_a_reason() -> None:
    shape = Shape(320, 64, 96)
    wrong = VerificationError("ann/matmul gave a wrong result on 320x64x96 (block edge 16)", "Fix it.")
    hidden = grade.masked(wrong, shape, "hidden shape 1")
    assert isinstance(hidden, VerificationError) and "320" not in str(hidden)
    assert str(hidden) == "ann/matmul gave a wrong result on hidden shape 1 (block edge 16) Fix it."
    square = grade.masked(VerificationError("wrong result on 256 (block edge 16)"), Shape.square(256), "hidden shape 2")
    assert "256" not in str(square)


def test_a_v8_file_gains_the_grades_table(tmp_path: Path) -> None:
    path = tmp_path / "v8.db"
    conn = database_at(path, 8)
    conn.commit()
    conn.close()
    with Store.open(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 14 and store.grades("t") == []
        row = {"task": "t", "submission": "ann", "source_hash": "h", "path": "p", "stage": GRADED, "reason": None,
               "share_geomean": 0.5, "grade": "A"}  # fmt: skip
        assert store.add_grade(None, row) == 1 and store.add_grade(None, row) == 2
        assert [g.attempt for g in store.grades("t")] == [1, 2] and store.grades("other") == []
        with pytest.raises(ValueError, match="attempt"):
            store.add_grade(None, {**row, "attempt": 3})


def test_the_map_is_the_pools_where_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from gemmlab.studies import scale

    # Without Dask: one submission after another here (a lambda, which no worker
    # could be sent, runs), and a scheduler named is an error naming the extra.
    monkeypatch.setattr(scale, "dask_installed", lambda: False)
    monkeypatch.setitem(sys.modules, "distributed", None)
    with grade.pooled(None) as pool:
        assert list(pool.map(lambda x: 2 * x, [1, 2])) == [(1, grade.Outcome(2)), (2, grade.Outcome(4))]
        assert pool.describe() == "inline: one item after another in this process (no Dask)"
    with pytest.raises(GemmlabError, match=r"gemmlab\[scale\]"):
        with grade.pooled("tcp://host:8786"):
            pass

    opened: list[str | None] = []

    class Pool:
        def __init__(self, scheduler=None):
            opened.append(scheduler)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            opened.append("closed")

        def map(self, fn, items, *, key=str):
            return ((item, grade.Outcome(value=fn(item))) for item in items)

    fake = types.SimpleNamespace(Pool=Pool, INLINE=scale.INLINE, dask_installed=lambda: True)
    monkeypatch.setattr(grade.grading, "scale", fake)
    with grade.pooled("tcp://host:8786") as pool:
        assert list(pool.map(lambda x: 2 * x, [1, 2])) == [(1, grade.Outcome(2)), (2, grade.Outcome(4))]
    assert opened == ["tcp://host:8786", "closed"]


def test_occupancy_of_a_result_reads_the_compute_capability_as_stored_or_live() -> None:
    # The GPU run of the class demo (H100, 2026-11-24) met "9.0" from a result's device record.
    from types import SimpleNamespace

    from gemmlab.studies.grade import occupancy_of

    def result(cc: object) -> SimpleNamespace:
        resources = SimpleNamespace(registers=32, smem_bytes=0)
        return SimpleNamespace(resources=resources, device={"cc": cc}, block=(16, 16, 1), dynamic_smem=0)

    text, pair = occupancy_of(result("9.0")), occupancy_of(result((9, 0)))
    assert text == pair and text["block"] == [16, 16, 1] and 0 < text["occupancy"] <= 1
    assert occupancy_of(result(None)) is None


def test_the_sanitizer_gets_its_own_limit_longer_than_a_steps(tmp_path: Path) -> None:
    task = grade.load_task(write_task(tmp_path, TASK + "[timing]\ntimeout = 20\n"))
    assert task.call_limit() == 20.0 and task.sanitize_limit() == 80.0
    assert (
        grade.load_task(write_task(tmp_path, TASK + "[timing]\ntimeout = 5\n")).sanitize_limit()
        == grade.SANITIZE_FLOOR_S
    )
    given = write_task(tmp_path, TASK + "[timing]\ntimeout = 20\nsanitize_timeout = 45\n")
    assert grade.load_task(given).sanitize_limit() == 45.0
    with pytest.raises(grade.TaskError, match="sanitize_timeout"):
        grade.load_task(write_task(tmp_path, TASK + "[timing]\nsanitize_timeout = -1\n"))


def test_a_wrong_answer_under_the_sanitizer_is_called_one() -> None:
    wrong = "Traceback ...\ngemmlab.core.errors.VerificationError: C differs from the reference at 12 elements"
    assert "results were wrong" in grade.sanitized_run_failure(wrong)
    assert grade.sanitized_run_failure("Segmentation fault") == "its run under the sanitizer failed"


def test_a_failed_sanitizer_run_without_findings_shows_how_it_ended() -> None:
    printed = "\n".join(f"line {i}" for i in range(30)) + "\n\n"
    assert grade.output_tail(printed, lines=3) == "line 27\nline 28\nline 29"
    assert grade.output_tail("  \n") == "(it printed nothing)"


def test_the_source_hash_covers_every_file_a_kernel_includes(tmp_path: Path) -> None:
    """Issue 49: a change to a header the kernel includes is a new attempt,
    whether the submission is given as a folder or as its .cu."""
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "matmul.cu").write_text('#include "tile.cuh"\n')
    (folder / "matmul.toml").write_text("function = 'f'\n")
    (folder / "tile.cuh").write_text("// one\n")
    as_folder, as_file = grade.find_submissions([folder])[0], grade.find_submissions([folder / "matmul.cu"])[0]
    before = (as_folder.source_hash, as_file.source_hash)
    (folder / "tile.cuh").write_text("// two\n")
    after = grade.find_submissions([folder])[0], grade.find_submissions([folder / "matmul.cu"])[0]
    assert before[0] != after[0].source_hash and before[1] != after[1].source_hash


def _secret_task(tmp_path: Path) -> grade.Task:
    path = tmp_path / "task.toml"
    path.write_text('name = "t"\nproblem = "matmul"\ndtypes = ["float32"]\nshapes = [256, [512, 384, 256]]\n'
                    "[hidden]\ncount = 2\nseed = 8675309\nmin = 64\nmax = 1024\nmultiple = 32\n"
                    '[grades]\nA = 0.5\nB = "verified"\n')  # fmt: skip
    return grade.load_task(path)


def test_no_reason_a_student_reads_holds_the_seed_a_hidden_shape_or_the_graders_paths(tmp_path: Path) -> None:
    """Issue 49: a submission that read the task (through /proc and gemmlab's own
    loader) raised an error holding the seed and every hidden shape, and an
    include put the seed into NVRTC's message; the leaderboard showed them."""
    task = _secret_task(tmp_path)
    (first, second) = task.hidden
    secret_sides = [d for d in (first.m, first.n, first.k) if d not in (256, 384, 512)]
    folder = tmp_path / "class" / "mallory"
    leak = (f"seed={task.hidden_rule.seed}; shapes {first.m}x{first.n}x{first.k}, ({second.m}, {second.n}, "
            f"{second.k}), [{first.m}, {first.n}, {first.k}]; M = {secret_sides[0] if secret_sides else 0}; "
            f"task at {task.path}; db at /srv/grading/gemmlab-results.sqlite; "
            f"mine at {folder}/matmul.cu:12")  # fmt: skip
    shown = grade.scrubbed(leak, task, folder)
    assert "8675309" not in shown and str(task.path) not in shown and "/srv/grading" not in shown
    assert "hidden shape 1" in shown and "hidden shape 2" in shown
    for side in secret_sides:
        assert str(side) not in shown
    assert "<submission>/matmul.cu:12" in shown
    public = grade.scrubbed("at 512x384x256 and 256: a public shape", task, folder)
    assert public == "at 512x384x256 and 256: a public shape"


def test_a_stages_reason_is_scrubbed_before_it_is_kept(tmp_path: Path, monkeypatch) -> None:
    task = _secret_task(tmp_path)
    folder = tmp_path / "mallory"
    folder.mkdir()
    (folder / "matmul.py").write_text("")
    submission = grade.Submission("mallory", folder, folder / "matmul.py", (folder / "matmul.py",))

    def leaks(*args) -> None:
        raise GemmlabError(f"the seed is {task.hidden_rule.seed} and the task is {task.path}", "")

    monkeypatch.setattr(grade.stages, "compile_stage", leaks)
    verdict = grade.staged(submission, task)
    assert verdict.stage == "compile" and "8675309" not in verdict.reason and str(task.path) not in verdict.reason


def _seen_environment() -> dict:
    import os
    import tempfile

    seen = {"HOME": os.environ.get("HOME"), "cwd": os.getcwd(), "tmp": tempfile.gettempdir()}
    return {**seen, "private": os.environ.get("GEMMLAB_PRIVATE_CACHE"), "grader": os.environ.get("GEMMLAB_TEST_DB")}


def test_a_python_submission_runs_in_an_empty_home_of_its_own_that_is_removed(tmp_path: Path, monkeypatch) -> None:
    """Issue 49: each submission gets its own empty HOME, temporary folder and
    compile cache, none of the grader's settings, and nothing of it is left."""
    from gemmlab.measure import watchdog

    monkeypatch.setenv("GEMMLAB_TEST_DB", str(tmp_path / "grades.sqlite"))
    submission = grade.Submission("eve", tmp_path, tmp_path / "matmul.py", ())
    with grade.sandbox(submission) as environment, watchdog.Worker(environment) as worker:
        seen = worker.call("environment", 60, _seen_environment)
        home = environment["HOME"]
    assert seen["HOME"] == seen["cwd"] == seen["tmp"] == home and seen["private"] == "1"
    assert seen["grader"] is None and not Path(home).exists()


def _imports_in_a_child(module: str) -> int:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode


def test_a_relative_pythonpath_reaches_what_a_sandboxed_worker_starts(tmp_path: Path, monkeypatch) -> None:
    """Seen on an H200 on 2026-11-29: graded from a checkout with PYTHONPATH=src,
    a CuPy submission failed its sanitize stage, because the worker moves into
    its empty HOME and the sanitizer's run of Python could no longer find
    gemmlab there. The sandbox hands on PYTHONPATH with absolute entries."""
    from gemmlab.measure import watchdog

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "gemmlab_marker_module.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["lib", os.environ.get("PYTHONPATH", "")]))
    submission = grade.Submission("eve", tmp_path, tmp_path / "matmul.py", ())
    with grade.sandbox(submission) as environment, watchdog.Worker(environment) as worker:
        returncode = worker.call("a child's import", 60, _imports_in_a_child, "gemmlab_marker_module")
    assert environment["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path / "lib")
    assert returncode == 0


def test_an_own_kernels_task_fails_a_library_gemm_naming_it(tmp_path: Path) -> None:
    """Issue 49: cupy.matmul handed in as "my kernel" was graded A. The kernels
    a timed call ran are stored (CUPTI); a task with kernels = "own" fails a
    submission whose timed calls ran a library's GEMM, and names it."""
    own = grade.load_task(
        write_task(tmp_path, TASK.replace('problem = "matmul"', 'problem = "matmul"\nkernels = "own"'))
    )
    any_task = grade.load_task(write_task(tmp_path, TASK))
    assert (own.kernels, any_task.kernels) == ("own", "any")
    library = ["sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"]

    def timed(names: list[str]) -> list[RunResult]:
        found = [result("s/matmul", s, 0.9) for s in own.shapes]
        for r in found:
            r.kernels_seen = names
        return found

    mine = grade.scored(grade.Verdict("s", "p", "h", GRADED, None), timed(["_Z14matmul_tiledILi16EEvPKfS1_Pfiii"]), own)
    assert mine.stage == GRADED
    cheat = grade.scored(grade.Verdict("s", "p", "h", GRADED, None), timed(library), own)
    assert cheat.stage == "time" and cheat.grade == FAIL and "sm90_xmma_gemm" in cheat.reason
    allowed = grade.scored(grade.Verdict("s", "p", "h", GRADED, None), timed(library), any_task)
    assert allowed.stage == GRADED
    with pytest.raises(TaskError, match="kernels"):
        grade.load_task(
            write_task(tmp_path, TASK.replace('problem = "matmul"', 'problem = "matmul"\nkernels = "mine"'))
        )


ADVERSARIAL_CLASS = Path(__file__).resolve().parent / "adversarial_class"


@pytest.mark.parametrize("name", ["include_task", "include_passwd", "macro_include", "include_next", "borrower",
                                  "symlink_borrower"])  # fmt: skip
def test_the_adversarial_classs_compile_attacks_are_refused_without_a_gpu(name: str) -> None:
    """What the compile stage decides of tests/adversarial_class, checked on
    the CPU (the GPU tier grades the whole class): the refusal expect.toml names."""
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    from gemmlab.kernels import catalogue

    expected = tomllib.loads((ADVERSARIAL_CLASS / "expect.toml").read_text())[name]
    with pytest.raises((CompileError, grade.StageFailed)) as caught:
        grade.confined(catalogue.get(str(ADVERSARIAL_CLASS / "class" / name / "matmul.toml")))
    assert all(w in str(caught.value) for w in expected["words"]), str(caught.value)
    assert "5551212" not in str(caught.value)
