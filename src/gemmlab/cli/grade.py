"""`gemmlab grade`: a class's kernels compiled, sanitized, verified and timed
against a task; a leaderboard of them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gemmlab.cli.app import DbOption, app, console, err_console, friendly
from gemmlab.core.errors import GemmlabError
from gemmlab.results.store import DEFAULT_PATH, Store

DEFAULT_OUT = Path("gemmlab-grades")


@app.command("grade")
@friendly
def grade_cmd(
    submissions: Annotated[
        list[Path],
        typer.Argument(
            help="Kernel files (.toml, .cu, .py), a submission's folder, or a folder of them (one per student)."
        ),
    ],
    task: Annotated[Path, typer.Option("--task", help="The task (TOML): problem, shapes, hidden shapes, grades.")],
    db: DbOption = DEFAULT_PATH,
    out: Annotated[Path, typer.Option("--out", help="Where leaderboard.csv and leaderboard.html go.")] = DEFAULT_OUT,
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="A running Dask scheduler's address (default: this host's GPUs).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Grade again submissions graded before, unchanged.")] = False,
    profile: Annotated[
        bool,
        typer.Option("--profile", help="Profile each timed kernel once with Nsight Compute, for its page (slower)."),
    ] = False,
) -> None:
    """Grade submissions: compile, compute-sanitizer, verification on hidden shapes, timing beside cuBLAS.

    Each submission stops at the first stage it fails, with the reason (docs/grading.md).

    A submission graded before and unchanged is skipped; a changed one is a new attempt, earlier ones are kept.

    --profile adds an Nsight Compute profile at the task's largest public shape (or its profile_shape) to the
    page of each submission that was timed; it never changes a grade.
    """
    from gemmlab.report.leaderboard import write_leaderboard
    from gemmlab.studies import grade
    from gemmlab.studies.sweep import run_record

    the_task = grade.load_task(task)
    found = grade.find_submissions(submissions)
    with Store.open(db) as store:
        pending = grade.to_grade(found, the_task, store, force=force)
        if pending:
            _check_sanitizer()
        if pending and profile:
            _warn_without_ncu()
        console.print(f"{the_task.name}: {len(pending)} to grade, {len(found) - len(pending)} graded before.",
                      highlight=False)  # fmt: skip
        with grade.pooled(scheduler) as pool:
            if pending:
                console.print(f"grading on: {escape(pool.describe())}", highlight=False)
            summary = grade.grade(found, the_task, store, map_fn=pool.map, force=force, run_record=run_record(),
                                  on_verdict=_print_verdict, profile=profile)  # fmt: skip
        key, since = grade.grader_key(), store.grades_signed_from()
        paths = write_leaderboard(out, the_task.name, store.grades(the_task.name), the_task.thresholds,
                                  store.rows(the_task.experiment), grade.hidden_names(the_task),
                                  trust=lambda row: grade.trusted(row, key, since),
                                  isolation=grade.isolation_in_force())  # fmt: skip
    if summary.written_meanwhile:
        err_console.print(
            f"[yellow]warning[/]: another process wrote the results database while "
            f"{escape(', '.join(summary.written_meanwhile))} were graded; the leaderboard shows only rows the grader "
            "signed, and names any other as tampered (docs/grading.md, 'What isolation covers').",
            highlight=False,
        )
    for submission, error in summary.errors:
        err_console.print(f"[red]not graded[/]: {escape(submission.name)}: {escape(error)}", highlight=False)
    walls = [v.wall_s for v in summary.graded if v.wall_s is not None]
    if walls:
        console.print(f"{len(walls)} graded in {sum(walls):.0f} s of workers' time, {sum(walls) / len(walls):.1f} s "
                      "each on average", highlight=False)  # fmt: skip
    console.print(f"leaderboard: {', '.join(map(str, paths))} (a page per submission in {out / 'submissions'}); "
                  f"results in {db}", highlight=False)  # fmt: skip
    if summary.errors:
        raise GemmlabError(
            f"{len(summary.errors)} submission(s) could not be graded (see above); nothing was stored for them.",
            "Fix what the messages name and run the command again: it grades only those.",
        )


def _check_sanitizer() -> None:
    """Refuse before grading anything when compute-sanitizer is missing: every
    submission would fail its sanitizer stage for a reason not its own."""
    from gemmlab.measure.sanitize import find_sanitizer

    find_sanitizer()


def _warn_without_ncu() -> None:
    """Say once, before grading, that no page will have a profile: grading goes
    on without one (each page says why), since the grades do not need it."""
    from gemmlab.core.errors import ProfilerError
    from gemmlab.measure.ncu.command import find_ncu

    try:
        find_ncu()
    except ProfilerError as exc:
        err_console.print(f"[yellow]--profile[/]: {escape(exc.cause)} Grading goes on without profiles; each "
                          f"page says why. {escape(exc.fix)}", highlight=False)  # fmt: skip


def _print_verdict(verdict: object) -> None:
    from gemmlab.studies.grade import GRADED, Verdict

    assert isinstance(verdict, Verdict)
    if verdict.stage == GRADED:
        share = "" if verdict.share_geomean is None else f"{verdict.share_geomean:.3f} of cuBLAS, "
        console.print(f"{escape(verdict.submission)}: {share}grade {escape(verdict.grade)}{_wall(verdict)}"
                      f"{_profile_note(verdict.profile)}", highlight=False)  # fmt: skip
    else:
        first = (verdict.reason or "").splitlines()[0]
        console.print(f"{escape(verdict.submission)}: [red]{escape(verdict.grade)}[/] at {verdict.stage}: "
                      f"{escape(first)}{_wall(verdict)}", highlight=False)  # fmt: skip


def _profile_note(profile: dict | None) -> str:
    if not profile:
        return ""
    return "; no profile (its page says why)" if "error" in profile else "; profiled"


def _wall(verdict: object) -> str:
    seconds = getattr(verdict, "wall_s", None)
    return "" if seconds is None else f" ({seconds:.1f} s)"
