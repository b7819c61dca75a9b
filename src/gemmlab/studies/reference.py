"""The source documents' published figures, as typed rows.

Each document's measured-results table is a tidy CSV beside its module under
``studies/experiments/`` (one number per row; see ``shared/reference/README.md``
in the project for how each was transcribed). A document's module names its
CSV and maps the document's kernel names to catalogue ids in a
:class:`PublishedTable`; each experiment takes the part of it that it re-runs
(a :class:`Published`). This module parses the CSVs and answers "what did the
document print for this kernel, metric, size and block edge".
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from gemmlab.core.errors import UnknownName

# The package that holds the documents' modules and their CSVs.
CSV_PACKAGE = "gemmlab.studies.experiments"

# The CSVs' metric names -> the report's, with the factor that converts the
# printed unit to ours (seconds become milliseconds).
_METRICS: dict[str, tuple[str, float]] = {
    "time_ms": ("time_ms", 1.0),
    "time_s": ("time_ms", 1e3),
    "gflops": ("gflops", 1.0),
    "gips": ("gips", 1.0),
    "cgma": ("cgma", 1.0),
    "bandwidth_gbs": ("gbs", 1.0),
}
# The report's published metrics with their title and unit, in the order the
# report shows them.
METRIC_TITLES: dict[str, tuple[str, str]] = {
    "time_ms": ("Time", "ms"),
    "gflops": ("GFLOPS", "GFLOP/s"),
    "gbs": ("Bandwidth", "GB/s"),
    "gips": ("GIPS", "10^9/s"),
    "cgma": ("CGMA", "FLOP/request"),
}
METRICS = frozenset(METRIC_TITLES)


@dataclass(frozen=True)
class ReferenceRow:
    """One published number, as printed (``value`` in ``unit``)."""

    source_doc: str
    table: str
    device: str
    kernel: str  # the document's name
    kernel_id: str | None  # the catalogue id, or None where gemmlab has no such kernel
    variant: str
    n: int
    block: int | None
    metric: str  # the CSV's name: time_ms, time_s, gflops, gips, cgma, bandwidth_gbs
    value: float
    unit: str
    note: str

    @property
    def label(self) -> str:
        """The catalogue id, or the document's name marked as having none."""
        return self.kernel_id if self.kernel_id is not None else f"{self.kernel} (no gemmlab kernel)"

    @property
    def report_metric(self) -> str:
        return _METRICS[self.metric][0]

    @property
    def report_value(self) -> float:
        """The value in the report's unit (milliseconds for times)."""
        return self.value * _METRICS[self.metric][1]


@dataclass(frozen=True, eq=False)
class PublishedTable:
    """One document's CSV (a file name under ``studies/experiments/``) and its
    kernel names -> catalogue ids; None where the document measured something
    gemmlab has no kernel for (its rows are kept and labelled)."""

    csv: str
    kernel_ids: Mapping[str, str | None]

    def rows(self) -> tuple[ReferenceRow, ...]:
        """Every row of the CSV."""
        return _load(self)


@functools.cache
def _load(table: PublishedTable) -> tuple[ReferenceRow, ...]:
    try:
        text = resources.files(CSV_PACKAGE).joinpath(table.csv).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnknownName(
            f"No reference file '{table.csv}'.", "Put the document's CSV beside its module in studies/experiments/."
        ) from None
    return tuple(_parse(table, text))


def _parse(table: PublishedTable, text: str) -> list[ReferenceRow]:
    rows = []
    for line_no, rec in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        if rec["kernel"] not in table.kernel_ids or rec["metric"] not in _METRICS:
            # A new kernel or metric in a CSV must be mapped before it can be
            # shown beside our numbers.
            raise UnknownName(
                f"{table.csv} line {line_no}: kernel '{rec['kernel']}' / metric '{rec['metric']}' is not mapped.",
                "Add the kernel to its document's kernel_ids in studies/experiments/, "
                "or the metric to _METRICS in studies/reference.py.",
            )
        rows.append(
            ReferenceRow(
                source_doc=rec["source_doc"],
                table=rec["table"],
                device=rec["device"],
                kernel=rec["kernel"],
                kernel_id=table.kernel_ids[rec["kernel"]],
                variant=rec["variant"],
                n=int(rec["n"]),
                block=int(rec["block"]) if rec["block"] else None,
                metric=rec["metric"],
                value=float(rec["value"]),
                unit=rec["unit"],
                note=rec["note"],
            )
        )
    return rows


@dataclass(frozen=True)
class Published:
    """The published figures an experiment re-runs: a document's table, or
    the sizes of it that belong to the experiment (None: all of them)."""

    table: PublishedTable
    sizes: frozenset[int] | None = None

    def rows(self) -> tuple[ReferenceRow, ...]:
        return tuple(r for r in self.table.rows() if self.sizes is None or r.n in self.sizes)

    def values(
        self, kernel: str, metric: str, device: str | None = None
    ) -> dict[tuple[int, int | None], tuple[float, str]]:
        """{(n, block): (value, device)} the document printed for this kernel and metric.

        ``kernel`` is a catalogue id or, for a kernel gemmlab lacks, the
        document's name; ``metric`` is one of METRICS (time_ms, gflops, gbs,
        gips, cgma), values converted to the report's units. Where a document
        measured the same cell on two machines (Kursk: Tables 1 and 2), the
        later table wins unless ``device`` picks one.
        """
        if metric not in METRICS:
            raise UnknownName(f"No published metric '{metric}'.", f"Known: {', '.join(sorted(METRICS))}.")
        found: dict[tuple[int, int | None], tuple[float, str]] = {}
        for r in self.rows():
            if kernel not in (r.kernel_id, r.kernel) or r.report_metric != metric:
                continue
            if device is not None and r.device != device:
                continue
            found[(r.n, r.block)] = (r.report_value, r.device)
        return found

    def devices(self) -> list[str]:
        """The machines the figures come from, in the document's order."""
        return list(dict.fromkeys(r.device for r in self.rows()))
