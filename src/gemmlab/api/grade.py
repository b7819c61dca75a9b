"""What `gemmlab grade` does: a task loaded, its submissions found, those not
graded before graded through :mod:`gemmlab.studies.grade` (here or on a Dask
cluster), each verdict stored, and the leaderboard written from the store.

:func:`grade_class` is the whole of it. The command line prints as it goes,
through the callbacks; a script may leave them out and read the :class:`Graded`
it returns. The grading machinery is imported when a class is graded, not when
this module is: `gemmlab --help` does not wait for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gemmlab.core.errors import ProfilerError
from gemmlab.store.store import DEFAULT_PATH, Store

if TYPE_CHECKING:
    from gemmlab.studies.grade import Task, Verdict
    from gemmlab.studies.grade.grading import GradeSummary

__all__ = ["DEFAULT_OUT", "Graded", "Plan", "check_sanitizer", "grade_class", "passed"]

# Where leaderboard.csv, leaderboard.html and the submissions' pages go.
DEFAULT_OUT = Path("gemmlab-grades")


@dataclass
class Plan:
    """What a grading is about to do, known before the pool starts."""

    task: Task
    pending: int  # submissions to grade now
    graded_before: int  # found unchanged since they were graded: skipped
    no_profiles: ProfilerError | None = None  # why no page will have a profile, when one was asked for


@dataclass
class Graded:
    """A graded class: what was graded, skipped or not graded, and the leaderboard's two files."""

    task: Task
    summary: GradeSummary
    leaderboard: list[Path]


def grade_class(
    submissions: Sequence[Path], task: Path, db: Path = DEFAULT_PATH, out: Path = DEFAULT_OUT, *,
    scheduler: str | None = None, force: bool = False, profile: bool = False,
    on_plan: Callable[[Plan], None] | None = None, on_pool: Callable[[str], None] | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> Graded:  # fmt: skip
    """Grade ``submissions`` (kernel files, a submission's folder, or a folder of
    them) against the task file ``task``, store each verdict in ``db`` and write
    the leaderboard into ``out``.

    ``on_plan`` hears what is to be graded before the pool starts, ``on_pool``
    where the pool grades (only when something is to be graded), ``on_verdict``
    each verdict as it is stored. A submission graded before and unchanged is
    skipped unless ``force``; ``profile`` adds an Nsight Compute profile to the
    page of each timed submission, never to its grade."""
    from gemmlab.measure.ncu.command import ncu_missing
    from gemmlab.report.leaderboard import write_leaderboard
    from gemmlab.studies import grade
    from gemmlab.studies.sweep import run_record

    the_task = grade.load_task(task)
    found = grade.find_submissions(list(submissions))
    with Store.open(db) as store:
        pending = grade.to_grade(found, the_task, store, force=force)
        if pending:
            check_sanitizer()
        no_profiles = ncu_missing() if pending and profile else None
        if on_plan is not None:
            on_plan(Plan(the_task, len(pending), len(found) - len(pending), no_profiles))
        with grade.pooled(scheduler) as pool:
            if pending and on_pool is not None:
                on_pool(pool.describe())
            summary = grade.grade(found, the_task, store, map_fn=pool.map, force=force, run_record=run_record(),
                                  on_verdict=on_verdict, profile=profile)  # fmt: skip
        key, since = grade.grader_key(), store.grades_signed_from()
        paths = write_leaderboard(out, the_task.name, store.grades(the_task.name), the_task.thresholds,
                                  store.rows(the_task.experiment), grade.hidden_names(the_task),
                                  trust=lambda row: grade.trusted(row, key, since),
                                  isolation=grade.isolation_in_force())  # fmt: skip
    return Graded(the_task, summary, paths)


def check_sanitizer() -> None:
    """Refuse before grading anything when compute-sanitizer is missing: every
    submission would fail its sanitizer stage for a reason not its own."""
    from gemmlab.measure.sanitize import find_sanitizer

    find_sanitizer()


def passed(verdict: Verdict) -> bool:
    """Whether ``verdict`` came through every stage to a grade (not a failure at one)."""
    from gemmlab.studies.grade import GRADED

    return verdict.stage == GRADED
