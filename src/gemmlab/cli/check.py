"""`gemmlab check`: every kernel under compute-sanitizer; zero reports and right results are the bar."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from gemmlab.api import catalogue
from gemmlab.api.check import DEFAULT_JOBS, TOOLS, KernelCheck, KernelVerdict, parse_point, sanitizer_tools, verdicts
from gemmlab.cli import batch
from gemmlab.cli.app import app, console, emit_json, err_console, friendly

# Failed points printed per kernel; the rest are counted.
SHOWN_FAILURES = 5


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

    Each kernel gets each tool's reports and, as a verdict of its own, whether its runs gave right results: a
    wrong result does not stop the tools. A user's kernel runs at the small sizes its declaration accepts;
    findings name the lines of its own file.
    """
    tools = sanitizer_tools(tool)
    resolved = batch.each(kernel_ids or catalogue.kernel_ids(), catalogue.kernel_id)
    found = verdicts([status.value for status in resolved if status.value is not None], tools, jobs)
    if as_json:
        emit_json([_json(v) for v in found.values()])
    elif found:
        console.print(_table(tools, list(found.values())))
    for verdict in found.values():
        _print_findings(verdict)
    batch.finish([batch.Status(s.name, error=found[s.value].error()) if s.value is not None else s for s in resolved])


def _table(tools: list[str], found: list[KernelVerdict]) -> Table:
    table = Table(title="compute-sanitizer", caption="tool columns: reports / points run under the tool")
    for col in ("kernel", "verification", *tools, "verdict"):
        table.add_column(col)
    for verdict in found:
        verification = "[green]ok[/]" if verdict.verification == "ok" else f"[red]{verdict.verification}[/]"
        done = "[green]clean[/]" if verdict.clean else "[red]not clean[/]"
        table.add_row(escape(verdict.kernel), verification, *map(_tool_cell, verdict.checks), done)
    return table


def _tool_cell(check: KernelCheck) -> str:
    if check.error is not None:
        return "[red]not checked[/]"
    if check.reports is None:
        return f"[red]no summary[/] / {len(check.points)}"
    colour = "red" if check.reports else "green"
    return f"[{colour}]{check.reports}[/] / {len(check.points)}"


def _print_findings(verdict: KernelVerdict) -> None:
    """Under a kernel that is not clean: each tool's findings, then each failed point's one-line error."""
    if verdict.clean:
        return
    err_console.print(f"[bold]{escape(verdict.kernel)}[/]", highlight=False)
    for check in verdict.checks:
        if (check.reports != 0 or check.bad_runs) and (lines := check.findings()):
            err_console.print(f"  {check.tool}:", highlight=False)
            err_console.print(
                "\n".join(f"    {line}" for line in lines.splitlines()), highlight=False, markup=False, soft_wrap=True
            )
    failed = list(verdict.failed_points.items())
    for point, error in failed[:SHOWN_FAILURES]:
        _, edge, shape = parse_point(point)
        where = f"{shape.m}x{shape.n}x{shape.k}" + (f", block edge {edge}" if edge else "")
        err_console.print(f"  run at {where}: {error}", highlight=False, markup=False, soft_wrap=True)
    if len(failed) > SHOWN_FAILURES:
        err_console.print(f"  ... and {len(failed) - SHOWN_FAILURES} more points that failed", highlight=False)


def _json(verdict: KernelVerdict) -> dict:
    return {
        "kernel": verdict.kernel,
        "clean": verdict.clean,
        "verification": verdict.verification,
        "failed_points": [{"point": p, "error": e} for p, e in verdict.failed_points.items()],
        "tools": {
            c.tool: {
                "points": len(c.points),
                "reports": c.reports,
                "not_run": c.not_run,
                "error": None if c.error is None else str(c.error),
            }
            for c in verdict.checks
        },
        "problems": verdict.problems(),
    }
