"""`gemmlab check`: every kernel under compute-sanitizer; zero reports is the bar."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gemmlab.cli.app import app, console, emit_json, err_console, friendly
from gemmlab.core.errors import GemmlabError
from gemmlab.measure.sanitize import DEFAULT_JOBS, TOOLS, check


@app.command("check")
@friendly
def check_cmd(
    kernel_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Kernels: catalogue ids or your declarations' paths (default: the catalogue)."),
    ] = None,
    tool: Annotated[
        list[str] | None, typer.Option(help=f"Sanitizer tools (default: all of {', '.join(TOOLS)}).")
    ] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Sanitizer processes side by side.")] = DEFAULT_JOBS,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run kernels at small sizes (odd ones too) under compute-sanitizer: memcheck, racecheck, synccheck, initcheck.

    A user's kernel runs at the small sizes its declaration accepts; findings name the lines of its own file.
    """
    reports = [check(kernel_ids or None, t, jobs=jobs) for t in (tool or TOOLS)]
    if as_json:
        emit_json([{"tool": r.tool, "points": r.points, "errors": r.errors, "clean": r.clean} for r in reports])
    else:
        table = Table(title="compute-sanitizer")
        for col in ("tool", "points run", "reports"):
            table.add_column(col)
        for r in reports:
            table.add_row(r.tool, str(r.points), "[green]0[/]" if r.clean else f"[red]{r.errors}[/]")
        console.print(table)
    dirty = [r for r in reports if not r.clean]
    for r in dirty:
        err_console.print(r.findings(), highlight=False, markup=False)
    if dirty:
        names = ", ".join(r.tool for r in dirty)
        raise GemmlabError(f"compute-sanitizer reported problems ({names}).", "See the findings above.")
