"""What `gemmlab report` does: the stored results as tables, plots and one
HTML page that opens offline (:func:`gemmlab.report.write_report`).

The report's drawing (matplotlib) is imported when a report is written, not
when this module is: `gemmlab --help` does not wait for it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gemmlab.store.store import DEFAULT_PATH

__all__ = ["DEFAULT_OUT", "write_report"]

# The folder a report is written to (a previous report there is replaced).
DEFAULT_OUT = Path("gemmlab-report")


def write_report(
    db: Path = DEFAULT_PATH,
    out: Path = DEFAULT_OUT,
    experiments: Sequence[str] | None = None,
    *,
    occupancy: bool = True,
) -> Path:
    """Write the report of the results in ``db`` into ``out`` and return its index.html.

    ``experiments``: the experiments to show (``stress`` for the stress runs;
    None: all stored). ``occupancy`` adds the theoretical occupancy tables, from
    the compiles stored with the runs (kernels of an older database are compiled
    now). The database is only read: nothing is written beside it."""
    from gemmlab import report

    return report.write_report(db, out, None if experiments is None else list(experiments), occupancy=occupancy)
