"""`gemmlab grade`: a class's kernels compiled, sanitized, verified and timed
against a task; a leaderboard of them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gemmlab.api.grade import DEFAULT_OUT, Plan, grade_class, passed
from gemmlab.api.results import DEFAULT_PATH
from gemmlab.cli.app import DbOption, app, console, err_console, friendly
from gemmlab.core.errors import GemmlabError

if TYPE_CHECKING:
    from gemmlab.api.grade import Verdict


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
    graded = grade_class(submissions, task, db, out, scheduler=scheduler, force=force, profile=profile,
                         on_plan=_print_plan, on_pool=_print_pool, on_verdict=_print_verdict)  # fmt: skip
    summary = graded.summary
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
    console.print(f"leaderboard: {', '.join(map(str, graded.leaderboard))} (a page per submission in "
                  f"{out / 'submissions'}); results in {db}", highlight=False)  # fmt: skip
    if summary.errors:
        raise GemmlabError(
            f"{len(summary.errors)} submission(s) could not be graded (see above); nothing was stored for them.",
            "Fix what the messages name and run the command again: it grades only those.",
        )


def _print_plan(plan: Plan) -> None:
    if plan.no_profiles is not None:
        exc = plan.no_profiles
        err_console.print(f"[yellow]--profile[/]: {escape(exc.cause)} Grading goes on without profiles; each "
                          f"page says why. {escape(exc.fix)}", highlight=False)  # fmt: skip
    console.print(f"{plan.task.name}: {plan.pending} to grade, {plan.graded_before} graded before.", highlight=False)


def _print_pool(where: str) -> None:
    console.print(f"grading on: {escape(where)}", highlight=False)


def _print_verdict(verdict: Verdict) -> None:
    if passed(verdict):
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
