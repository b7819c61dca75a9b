"""A Python submission measured at arm's length (gemmlab.measure.apart),
without a GPU: host memory (NumPy arrays in shared memory), the same protocol
the GPU path follows. Each hostile submission below is caught, or what it
does reaches nothing of the grader's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import python_submission
from gemmlab.core.errors import GemmlabError, KernelStopped, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.measure import apart
from gemmlab.measure.apart import HOST, measure_apart, run_apart
from gemmlab.store.store import Store
from gemmlab.studies import grade

SHAPE = Shape(48, 40, 32)


HONEST = """
import numpy as np

def matmul(A, B, C):
    np.matmul(A, B, out=C)
"""

# Slow (a sleep per call), and it stops the clock of its own process.
PATCHES_THE_CLOCK = """
import time
import numpy as np

_sleep = time.sleep
time.perf_counter = lambda: 0.0
time.monotonic = lambda: 0.0

def matmul(A, B, C):
    _sleep(0.02)
    np.matmul(A, B, out=C)
"""

# Computes the first answer, then hands it back for every later call.
CACHED = """
import numpy as np

_kept = []

def matmul(A, B, C):
    if not _kept:
        _kept.append(A @ B)
    C[...] = _kept[0]
"""

# Works on the first call only, then returns at once.
SKIPS = """
import numpy as np

_calls = []

def matmul(A, B, C):
    _calls.append(1)
    if len(_calls) == 1:
        np.matmul(A, B, out=C)
"""

# Looks for the grader's database where the grader runs, and in the
# environment, and writes a grade of its own into whatever it finds.
OPENS_THE_STORE = """
import os
import sqlite3
import numpy as np

for path in ("gemmlab-results.sqlite", os.environ.get("GEMMLAB_TEST_DB", "")):
    if path and os.path.exists(path):
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS planted (x)")
            conn.execute("INSERT INTO planted VALUES (1)")

def matmul(A, B, C):
    np.matmul(A, B, out=C)
"""

# Makes the grader's empty call slow, so that more is subtracted from each batch:
# the empty call's function, looked up by name in the child, is replaced.
SLOWS_THE_EMPTY_CALL = """
import sys
import time
import numpy as np

apart = sys.modules["gemmlab.measure.apart"]
for name in ("child_ping", "child_idle"):
    setattr(apart, name, lambda *args, **kwargs: time.sleep(0.2))

def matmul(A, B, C):
    time.sleep(0.01)
    np.matmul(A, B, out=C)
"""

# Answers at once and does the work on a thread of its own, 50 ms later.
ANSWERS_EARLY = """
import threading
import time
import numpy as np

def _later(A, B, C):
    time.sleep(0.05)
    np.matmul(A, B, out=C)

def matmul(A, B, C):
    threading.Thread(target=_later, args=(A, B, C)).start()
"""

HANGS = """
def matmul(A, B, C):
    while True:
        pass
"""

RAISES = """
def matmul(A, B, C):
    raise ValueError("no idea")
"""


def test_an_honest_submission_is_checked_and_timed_beside_the_library(tmp_path: Path) -> None:
    measured = measure_apart(python_submission(tmp_path, "honest", HONEST), SHAPE, "float32", memory=HOST, batches=3,
                             launches=3)  # fmt: skip
    assert measured.launches == 9 and measured.error <= measured.tolerance
    assert measured.timing is not None and measured.timing.reps == 3
    assert measured.baseline_timing is not None and measured.baseline_timing.reps == 3


def test_a_patched_clock_in_the_submission_does_not_reach_the_graders(tmp_path: Path) -> None:
    measured = measure_apart(python_submission(tmp_path, "clock", PATCHES_THE_CLOCK), SHAPE, "float32", memory=HOST,
                             batches=2, launches=2)  # fmt: skip
    # 20 ms of sleep per launch, seen by the grader's clock whatever the submission did to its own.
    assert measured.timing is not None and measured.timing.min_ms >= 15.0


def test_what_is_subtracted_is_measured_before_the_submission_is_imported(tmp_path: Path) -> None:
    """Issue 48: a submission that made the grader's empty call take longer got
    1.44x cuBLAS from an honest 0.74x. The empty call is now timed before it is imported."""
    measured = measure_apart(python_submission(tmp_path, "slows", SLOWS_THE_EMPTY_CALL), SHAPE, "float32",
                             memory=HOST, batches=2, launches=2)  # fmt: skip
    assert measured.timing is not None and measured.timing.min_ms >= 8.0  # its 10 ms of sleep per launch


def test_an_answer_before_the_work_is_done_is_refused(tmp_path: Path) -> None:
    """Issue 48: a submission whose call returned before its work ended was graded
    as verified; the check right after the reply now finds C unfinished."""
    with pytest.raises(VerificationError, match="answered before its GPU work had ended"):
        measure_apart(python_submission(tmp_path, "early", ANSWERS_EARLY), SHAPE, "float32", memory=HOST,
                      batches=1, launches=2)  # fmt: skip


def test_a_cached_answer_fails_on_the_fresh_inputs_of_the_next_launch(tmp_path: Path) -> None:
    with pytest.raises(VerificationError, match="launch 2 of 3") as caught:
        path = python_submission(tmp_path, "cached", CACHED)
        measure_apart(path, SHAPE, "float32", memory=HOST, batches=1, launches=3)
    assert "kept from an earlier call" in caught.value.fix


def test_a_skipped_launch_leaves_the_poison_and_fails(tmp_path: Path) -> None:
    with pytest.raises(VerificationError, match="NaN"):
        measure_apart(python_submission(tmp_path, "skips", SKIPS), SHAPE, "float32", memory=HOST, batches=1, launches=2)


def test_the_submission_runs_where_the_graders_database_is_out_of_reach(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "gemmlab-results.sqlite"
    Store.open(db).close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GEMMLAB_TEST_DB", str(db))
    measure_apart(python_submission(tmp_path, "store", OPENS_THE_STORE), SHAPE, "float32", memory=HOST, batches=1,
                  launches=1)  # fmt: skip
    with sqlite3.connect(db) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "planted" not in tables and "grades" in tables


def test_a_hang_is_stopped_at_its_limit(tmp_path: Path) -> None:
    with pytest.raises(KernelStopped) as caught:
        measure_apart(python_submission(tmp_path, "hangs", HANGS), SHAPE, "float32", memory=HOST, batches=1, launches=1,
                      limit_s=3.0)  # fmt: skip
    assert caught.value.kind == "hang"


def test_an_exception_names_the_submissions_line(tmp_path: Path) -> None:
    with pytest.raises(GemmlabError, match=r"raised at line 3 .*ValueError: no idea"):
        path = python_submission(tmp_path, "raises", RAISES)
        measure_apart(path, SHAPE, "float32", memory=HOST, batches=1, launches=1)


def test_the_result_stores_like_a_run_and_its_share_is_the_graders_own(tmp_path: Path) -> None:
    result = run_apart(python_submission(tmp_path, "honest", HONEST), SHAPE, "float32", batches=2, launches=2,
                       limit_s=60.0, memory=HOST)  # fmt: skip
    assert result.backend == "python" and result.kernel == "honest/matmul" and result.shape == SHAPE
    assert result.ratio_to_baseline == pytest.approx(result.baseline_timing.median_ms / result.timing.median_ms)
    with Store.open(tmp_path / "r.db") as store:
        store.add_results(store.start_run({}), "grade:t", [result])
        assert [r["kernel"] for r in store.rows("grade:t")] == ["honest/matmul"]


def test_the_child_is_not_given_the_graders_settings(monkeypatch) -> None:
    monkeypatch.setenv("GEMMLAB_DB", "/somewhere/results.sqlite")
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://x:1")
    dropped = apart.private_environment()
    assert "GEMMLAB_DB" in dropped and "DASK_SCHEDULER_ADDRESS" in dropped and "PATH" not in dropped


def test_a_row_written_by_anyone_but_the_grader_is_named_on_itself_and_blames_nobody(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 49: a process a submission started rewrote its own row to A, the
    leaderboard put it first, and the next, honest submission was failed with
    "isolation". Now the grader signs what it writes: the forged and the
    rewritten rows are shown as tampered, on themselves; the submission graded
    meanwhile is graded as it is; a forged row for a source not yet graded
    does not spare it from grading."""
    from gemmlab.report.leaderboard import standings

    monkeypatch.setenv(grade.KEY_VARIABLE, str(tmp_path / "grader.key"))
    db = tmp_path / "results.db"
    python_submission(tmp_path / "class", "sneaky", HONEST)
    python_submission(tmp_path / "class", "honest", HONEST)
    task_path = tmp_path / "task.toml"
    task_path.write_text(
        'name = "t"\nproblem = "matmul"\ndtypes = ["float32"]\nshapes = [64]\n[grades]\np = "verified"\n'
    )
    found = grade.find_submissions([tmp_path / "class"])
    honest = next(s for s in found if s.name == "honest")
    with Store.open(db):  # made, at the current schema
        pass
    with sqlite3.connect(db) as conn:  # a row forged ahead, for the honest submission's source as it is
        conn.execute("INSERT INTO grades (task, submission, attempt, source_hash, stage, grade, created) "
                     f"VALUES ('t', 'honest', 1, '{honest.source_hash}', 'graded', 'p', '')")  # fmt: skip

    def writes_the_store(submission: grade.Submission) -> grade.Verdict:
        if submission.name == "sneaky":  # its daemon rewrites every row it finds to an A
            with sqlite3.connect(db) as conn:
                conn.execute("UPDATE grades SET grade = 'A', share_geomean = 99.0")
        return grade.Verdict(submission.name, "", submission.source_hash, grade.GRADED, None, grade="p")

    def fake_map(fn, items, *, key=str):
        for item in sorted(items, key=lambda s: s.name, reverse=True):  # sneaky, then honest
            yield item, grade.Outcome(value=writes_the_store(item))

    with Store.open(db) as store:
        task = grade.load_task(task_path)
        assert honest in grade.to_grade(found, task, store)  # the forged row grades nothing
        summary = grade.grade(found, task, store, map_fn=fake_map)
        rows = store.grades("t")
        key, since = grade.grader_key(), store.grades_signed_from()
    assert [v.stage for v in summary.graded] == [grade.GRADED, grade.GRADED] and summary.written_meanwhile
    board = standings(rows, lambda row: grade.trusted(row, key, since))
    by = {(r["submission"], r["stage"]): r for r in board}
    assert by[("sneaky", "graded")]["grade"] == "p" and by[("honest", "graded")]["grade"] == "p"
    forged = [r for r in board if r["stage"] == grade.TAMPERED]
    assert [r["submission"] for r in forged] == ["honest"] and "attempt 1 of honest" in forged[0]["reason"]
    with sqlite3.connect(db) as conn:  # the daemon, still running after the grader, rewrites its own verdict
        conn.execute("UPDATE grades SET grade = 'A', share_geomean = 99.0 WHERE submission = 'sneaky'")
    with Store.open(db) as store:
        board = standings(store.grades("t"), lambda row: grade.trusted(row, key, since))
    assert [(r["submission"], r["stage"], r["grade"]) for r in board if r["submission"] == "sneaky"] == [
        ("sneaky", grade.TAMPERED, "fail")
    ]
    assert any(r["submission"] == "honest" and r["stage"] == grade.GRADED for r in board)


# Writes a file into its HOME and its temporary folder at import.
LEAVES_FILES = """
import os
import tempfile
import numpy as np

open(os.path.expanduser("~/planted-by-a-submission"), "w").write("x")
open(os.path.join(tempfile.gettempdir(), "planted-by-a-submission"), "w").write("x")

def matmul(A, B, C):
    np.matmul(A, B, out=C)
"""


def test_a_submissions_home_and_temporary_folder_are_its_own_and_removed(tmp_path: Path, monkeypatch) -> None:
    """Issue 49 (and 52: each child left a gemmlab-submission-* folder behind)."""
    import glob
    import os
    import tempfile

    monkeypatch.setenv("HOME", str(tmp_path / "grader-home"))
    (tmp_path / "grader-home").mkdir()
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "gemmlab-submission-*")))
    measure_apart(python_submission(tmp_path, "leaves", LEAVES_FILES), SHAPE, "float32", memory=HOST, batches=1,
                  launches=2)  # fmt: skip
    assert not (tmp_path / "grader-home" / "planted-by-a-submission").exists()
    assert not os.path.exists(os.path.join(tempfile.gettempdir(), "planted-by-a-submission"))
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "gemmlab-submission-*"))) == before
