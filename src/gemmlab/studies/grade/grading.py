"""Grading a class: which submissions are due, the pool that grades them (here or on a
Dask cluster), and each verdict stored, signed, as it comes back."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemmlab.studies import scale
from gemmlab.studies.grade.stages import Verdict, grade_one
from gemmlab.studies.grade.submissions import Submission
from gemmlab.studies.grade.task import Task
from gemmlab.studies.grade.trust import grader_key, signature, trusted

MapFn = Callable[..., Iterator[tuple[Any, Any]]]


def inline_map(fn: Callable[[Any], Any], items: Iterable[Any], *, key: Callable[[Any], str] = str) -> Iterator:
    """``fn`` on each item in this process, in order: the map with nothing to start."""
    return scale.Pool(scheduler=scale.INLINE).map(fn, items, key=key)


@contextlib.contextmanager
def pooled(scheduler: str | None = None) -> Iterator[Any]:
    """A scale.Pool over the local GPUs, or the Dask cluster at ``scheduler``:
    its ``map`` grades, its ``describe`` says where. Without Dask installed and
    with no scheduler named, one submission after another in this process; a
    scheduler named without Dask is the pool's error, which names the extra."""
    if scheduler is None and not scale.dask_installed():
        scheduler = scale.INLINE
    with scale.Pool(scheduler=scheduler) as pool:
        yield pool


@dataclass
class GradeSummary:
    graded: list[Verdict] = field(default_factory=list)
    skipped: list[Submission] = field(default_factory=list)  # graded before, unchanged
    errors: list[tuple[Submission, str]] = field(default_factory=list)  # not graded: nothing stored
    # Submissions being graded when another process wrote the database (whoever it was: with
    # several workers it cannot be told); the board shows only rows the grader signed.
    written_meanwhile: list[str] = field(default_factory=list)


def to_grade(submissions: Sequence[Submission], task: Task, store: Any, *, force: bool = False) -> list[Submission]:
    """The submissions not graded before in their present form (all with ``force``)."""
    if force:
        return list(submissions)
    key, since = grader_key(), store.grades_signed_from()
    # A row the grader did not write (a forged verdict for a source not yet graded) grades nothing.
    done = {(row.submission, row.source_hash) for row in store.grades(task.name)
            if trusted(row, key, since) is not False}  # fmt: skip
    return [s for s in submissions if (s.name, s.source_hash) not in done]


def grade(
    submissions: Sequence[Submission], task: Task, store: Any, *, map_fn: MapFn = inline_map, force: bool = False,
    run_record: dict | None = None, on_verdict: Callable[[Verdict], None] | None = None, profile: bool = False,
) -> GradeSummary:  # fmt: skip
    """Grade ``submissions`` through ``map_fn`` and store each verdict (a new
    attempt, with its profile where ``profile``) and its timed results here, as
    each comes back, so that a run stopped halfway keeps what it graded."""
    summary = GradeSummary()
    pending = to_grade(submissions, task, store, force=force)
    summary.skipped = [s for s in submissions if s not in pending]
    run_id: int | None = None
    seen = store.data_version()
    key = grader_key()
    one = functools.partial(grade_one, task=task, profile=profile)
    for submission, outcome in map_fn(one, pending, key=lambda s: s.name):
        if outcome.error is not None:
            summary.errors.append((submission, outcome.error))
            continue
        verdict: Verdict = outcome.value
        if (now := store.data_version()) != seen:
            seen = now
            summary.written_meanwhile.append(submission.name)
        if run_id is None:
            run_id = store.start_run(run_record or {})
        if verdict.results:
            store.add_results(run_id, task.experiment, verdict.results)
        store.add_grade(run_id, verdict.row(task), sign=lambda row: signature(row, key))
        summary.graded.append(verdict)
        if on_verdict is not None:
            on_verdict(verdict)
    return summary
