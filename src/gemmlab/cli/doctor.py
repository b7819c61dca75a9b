"""`gemmlab doctor`: one table of what this machine can do (gemmlab.api.doctor
asks and decides; this module prints)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from gemmlab.api.results import DEFAULT_PATH
from gemmlab.cli.app import app, console, emit_json, friendly

if TYPE_CHECKING:
    from gemmlab.api.doctor import Row

# The exit code when gemmlab's core, compiling with NVRTC, cannot work here;
# anything else the doctor finds missing leaves the exit code 0.
EXIT_CORE_UNUSABLE = 1


@app.command()
@friendly
def doctor(
    db: Annotated[Path, typer.Option("--db", help="The results database to check (not created).")] = DEFAULT_PATH,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """What this machine can do, and the fix for what it cannot: run it first on a new machine.

    One line each: the driver, NVRTC, the GPUs, compute-sanitizer, ncu, the cache, the database, the extras."""
    from gemmlab.api import doctor as probes

    machine = probes.probe(db)
    found = probes.rows(machine)
    if as_json:
        emit_json([asdict(row) for row in found])
    else:
        console.print(doctor_table(found))
    if not probes.core_usable(machine):
        raise typer.Exit(EXIT_CORE_UNUSABLE)


def doctor_table(found: list[Row]) -> Table:
    """The rows as a table that fits an 80-column terminal: the component and
    its status never wrap; what was found, and beneath it what it enables or
    the fix, wrap in the one wide column left, a long path folded, never cut."""
    table = Table(title="gemmlab doctor: what this machine can do")
    table.add_column("component", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("found; what it enables, or the fix", overflow="fold")
    for row in found:
        colour = "green" if row.fine else "red" if row.component == "NVRTC" else "yellow"
        found_text = f"{escape(row.detail)}\n" if row.detail else ""
        table.add_row(row.component, f"[{colour}]{row.status}[/]", f"{found_text}[dim]{escape(row.note)}[/]")
    return table
