"""The report of `gemmlab reproduce` / `gemmlab report`: tables, plots and one
HTML page of stored results, with the source documents' figures beside ours.

Tables have the documents' shape: one per kernel and metric, sizes as rows,
block edges as columns; each cell reads "ours (published)". Every table is also
written as CSV (plain numbers) and all of a section's tables as one Markdown
file. The page needs no server and no JavaScript: open ``index.html``.

Rows are the store's dicts (see :func:`write_report`); building the tables is
pure, so it is tested without a GPU or a database.
"""

from __future__ import annotations

import csv
import html
import io
import itertools
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gemmlab.backends.cpu import is_cpu_kernel
from gemmlab.core.errors import GemmlabError, UnknownName
from gemmlab.kernels import catalogue
from gemmlab.studies import experiments as registry
from gemmlab.studies.experiments.base import Layout, PlotSpec, plot
from gemmlab.studies.reference import METRIC_TITLES, Published, ReferenceRow

Row = dict[str, Any]
SizeKey = tuple[int, int, int]  # (m, n, k)
Edge = int | None  # None: the kernel takes no block edge
CellKey = tuple[SizeKey, Edge]

# A report directory carries this file, so that a later run may replace it
# without risking a directory of the user's that happens to share the name.
MARKER = ".gemmlab-report"
NO_EXPERIMENT = "(no experiment)"
DPI = 100


# --------------------------------------------------------------------------
# Metrics


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _column(name: str) -> Callable[[Row], float | None]:
    return lambda row: _number(row.get(name))


def _headline(kind: str, column: str) -> Callable[[Row], float | None]:
    """GFLOPS for compute-bound rows, GB/s for memory-bound ones (row["metric"])."""
    return lambda row: _number(row.get(column)) if (row.get("metric") or "gflops") == kind else None


def _e2e_ms(row: Row) -> float | None:
    """The Kursk paper's time: copies in + kernel + copies out (GPU rows only)."""
    median, h2d, d2h = (_number(row.get(key)) for key in ("median_ms", "h2d_ms", "d2h_ms"))
    if median is None or h2d is None or d2h is None:
        return None
    return h2d + median + d2h


@dataclass(frozen=True)
class Metric:
    key: str  # used in file names and by Layout.published_metrics
    title: str  # table captions
    short: str  # axis labels
    unit: str
    value: Callable[[Row], float | None]
    higher_is_better: bool = True
    end_to_end: bool = False  # depends on the host memory (pinned or pageable)


TIME = Metric("time", "Kernel time (median)", "time", "ms", _column("median_ms"), higher_is_better=False)
GFLOPS = Metric("gflops", "GFLOPS", "GFLOPS", "GFLOP/s", _headline("gflops", "gflops"))
BANDWIDTH = Metric("bandwidth", "Bandwidth", "bandwidth", "GB/s", _headline("gbs", "gbytes_per_s"))
E2E_TIME = Metric(
    "e2e_time", "End-to-end time (copies in and out included)", "end-to-end time", "ms", _e2e_ms,
    higher_is_better=False, end_to_end=True,
)  # fmt: skip
E2E_GFLOPS = Metric(
    "e2e_gflops", "End-to-end GFLOPS (copies in and out included)", "end-to-end GFLOPS", "GFLOP/s",
    _column("e2e_gflops"), end_to_end=True,
)  # fmt: skip
METRICS: tuple[Metric, ...] = (
    TIME,
    GFLOPS,
    BANDWIDTH,
    E2E_TIME,
    E2E_GFLOPS,
    Metric("gips", "GIPS (warp instructions executed per second)", "GIPS", "10^9/s", _column("gips")),
    Metric("cgma_measured", "CGMA, measured (FLOPs per global-memory request)", "CGMA, measured", "FLOP/request",
           _column("cgma_measured")),
    Metric("cgma_analytic", "CGMA, analytic (FLOPs per global access of a thread)", "CGMA, analytic", "FLOP/access",
           _column("cgma_analytic")),
    Metric("achieved_occupancy", "Achieved occupancy", "achieved occupancy", "fraction",
           _column("achieved_occupancy")),
    Metric("ratio_to_baseline", "Speed relative to the library (library time / kernel time)", "speed vs library",
           "ratio", _column("ratio_to_baseline")),
)  # fmt: skip

# A CPU baseline copies nothing, so its plain figure is its end-to-end one.
PLAIN_OF_E2E = {"e2e_time": "time", "e2e_gflops": "gflops"}


# --------------------------------------------------------------------------
# Rows -> sections -> series


def size_label(size: SizeKey) -> str:
    """'1024' for a square product, 'MxN' for a 2-D shape without a reduction
    (copies, transposes, vectors: K = 1), else 'MxNxK'."""
    m, n, k = size
    if m == n == k:
        return str(n)
    return f"{m}x{n}" if k == 1 else f"{m}x{n}x{k}"


def size_text(size: SizeKey) -> str:
    """'N = 1024' for a square product, the shape otherwise."""
    m, n, k = size
    return f"N = {n}" if m == n == k else size_label(size)


def edge_label(edge: Edge) -> str:
    return "—" if edge is None else str(edge)


def _edge_order(edge: Edge) -> int:
    return -1 if edge is None else edge


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "x"


@dataclass
class Series:
    """One kernel configuration of a section: its rows by (size, block edge)."""

    kernel: str
    label: str
    # The label without the host memory, which changes only end-to-end figures.
    kernel_label: str = ""
    cells: dict[CellKey, Row] = field(default_factory=dict)

    def sizes(self) -> list[SizeKey]:
        return sorted({size for size, _ in self.cells})

    def edges(self) -> list[Edge]:
        return sorted({edge for _, edge in self.cells}, key=_edge_order)

    def value(self, metric: Metric, size: SizeKey, edge: Edge) -> float | None:
        row = self.cells.get((size, edge))
        return None if row is None else metric.value(row)

    def has(self, metric: Metric) -> bool:
        return any(metric.value(row) is not None for row in self.cells.values())

    def best(self, metric: Metric, size: SizeKey) -> tuple[float, Edge] | None:
        """The best value over block edges at one size, and the edge that gives it."""
        found = [(v, e) for e in self.edges() if (v := self.value(metric, size, e)) is not None]
        if not found:
            return None
        pick = max if metric.higher_is_better else min
        return pick(found, key=lambda item: item[0])


class Footnotes:
    """Numbers each distinct warning text once per section."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1

    def marks(self, row: Row | None) -> list[int]:
        return [self.mark(w) for w in (row or {}).get("warnings") or []]


@dataclass
class Section:
    """The results of one experiment on one GPU."""

    experiment: str
    gpu_name: str
    slug: str
    rows: list[Row]
    series: list[Series]
    notes: Footnotes = field(default_factory=Footnotes)

    @property
    def layout(self) -> Layout:
        document = registry.find(self.experiment)
        return document.layout if document else SWEEP_LAYOUT

    @property
    def published(self) -> Published | None:
        """The document's figures this section is compared with (None: no document)."""
        document = registry.find(self.experiment)
        return document.published if document else None

    def published_rows(self) -> tuple[ReferenceRow, ...]:
        return self.published.rows() if self.published else ()

    @property
    def cc(self) -> str | None:
        return next((str(r["cc"]) for r in self.rows if r.get("cc")), None)

    @property
    def dates(self) -> str:
        dates = sorted({str(r["date"]) for r in self.rows if r.get("date")})
        if not dates:
            return "date not recorded"
        return dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"

    def headline(self) -> Metric:
        """GFLOPS, or GB/s where most rows are memory-bound."""
        count = lambda m: sum(m.value(r) is not None for r in self.rows)
        return BANDWIDTH if count(BANDWIDTH) > count(GFLOPS) else GFLOPS

    def kernel_series(self, kernel: str) -> Series | None:
        return next((s for s in self.series if s.kernel == kernel), None)


def _normalise(row: Row) -> Row:
    out = dict(row)
    out["warnings"] = [str(w) for w in out.get("warnings") or []]
    out["experiment"] = out.get("experiment") or NO_EXPERIMENT
    out["gpu_name"] = out.get("gpu_name") or "unknown GPU"
    # Rows written by hand (a notebook) may give only n for a square product.
    for dim in ("m", "k"):
        if out.get(dim) is None:
            out[dim] = out.get("n")
    return out


def _row_size(row: Row) -> SizeKey:
    return (int(row["m"]), int(row["n"]), int(row["k"]))


def _series_of(rows: list[Row]) -> list[Series]:
    """One series per (kernel, dtype, variant, host memory); a label names the
    dtype and host memory only where the kernel has more than one."""
    seen: dict[tuple[str, str], set[Any]] = {}
    for r in rows:
        for what in ("dtype", "host_memory"):
            seen.setdefault((r["kernel"], what), set()).add(r.get(what))
    varies = lambda r, what: len(seen[(r["kernel"], what)]) > 1 and r.get(what)
    by_key: dict[tuple, Series] = {}
    for r in rows:
        key = (r["kernel"], r.get("dtype"), r.get("variant"), r.get("host_memory"))
        if key not in by_key:
            parts = [r["kernel"]]
            if varies(r, "dtype"):
                parts.append(r["dtype"])
            # End-to-end rows name their host memory in `variant` too; say it once.
            if r.get("variant") and r.get("variant") != r.get("host_memory"):
                parts.append(str(r["variant"]))
            kernel_label = ", ".join(parts)
            if varies(r, "host_memory"):
                parts.append(f"{r['host_memory']} host memory")
            by_key[key] = Series(r["kernel"], ", ".join(parts), kernel_label)
        size = _row_size(r)
        edge = int(r["block_edge"]) if r.get("block_edge") else None
        # A later run of the same point replaces an earlier one.
        by_key[key].cells[(size, edge)] = r
    # CPU baselines first, then the catalogue's ladder, then anything else.
    ladder = {kernel: i for i, kernel in enumerate(catalogue.kernel_ids())}
    return sorted(by_key.values(), key=lambda s: (not is_cpu_kernel(s.kernel), ladder.get(s.kernel, len(ladder))))


def build_sections(rows: Iterable[Row], experiments: Sequence[str] | None = None) -> list[Section]:
    """Group rows into sections (experiment x GPU), experiments in the spec's order."""
    rows = [_normalise(r) for r in rows]
    if not rows:
        raise GemmlabError("There are no results to report.", "Run `gemmlab reproduce` or `gemmlab sweep` first.")
    present = list(dict.fromkeys(r["experiment"] for r in rows))
    if experiments:
        missing = [e for e in experiments if e not in present]
        if missing:
            raise UnknownName(
                f"No stored results for {', '.join(missing)}.",
                f"Stored: {', '.join(present)}. Run `gemmlab reproduce {missing[0]}` to measure it.",
            )
        present = [e for e in present if e in experiments]
    order = {name: i for i, name in enumerate(registry.names())}
    present.sort(key=lambda e: order.get(e, len(order)))
    sections = []
    for experiment in present:
        exp_rows = [r for r in rows if r["experiment"] == experiment]
        gpus = list(dict.fromkeys(r["gpu_name"] for r in exp_rows))
        for gpu in gpus:
            sec_rows = [r for r in exp_rows if r["gpu_name"] == gpu]
            name = slug(experiment) if len(gpus) == 1 else f"{slug(experiment)}--{slug(gpu)}"
            sections.append(Section(experiment, gpu, name, sec_rows, _series_of(sec_rows)))
    return sections


# --------------------------------------------------------------------------
# Tables


def fmt(value: float | None) -> str:
    """A number with the digits that matter: four significant ones, thousands grouped."""
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


@dataclass
class MetricTable:
    """One kernel, one metric: sizes as rows, block edges as columns."""

    label: str
    kernel: str
    metric: Metric
    sizes: list[SizeKey]
    edges: list[Edge]
    ours: dict[CellKey, float]
    published: dict[CellKey, float]
    marks: dict[CellKey, list[int]]
    our_device: str
    published_devices: list[str]

    @property
    def title(self) -> str:
        return f"{self.label}: {self.metric.title} [{self.metric.unit}]"

    @property
    def file_stem(self) -> str:
        return f"{slug(self.label)}__{self.metric.key}"

    @property
    def legend(self) -> str:
        text = f"ours on {self.our_device}"
        if self.published:
            text += f" (published, {'; '.join(self.published_devices)})"
        return text

    def cell(self, key: CellKey, mark: Callable[[list[int]], str], pub: Callable[[str], str]) -> str:
        """'ours' + warning marks + '(published)'; '—' where only the document measured it."""
        ours, published = self.ours.get(key), self.published.get(key)
        if ours is None and published is None:
            return ""
        text = "—" if ours is None else fmt(ours) + mark(self.marks.get(key, []))
        return text if published is None else text + pub(fmt(published))

    def grid(self, mark: Callable[[list[int]], str], pub: Callable[[str], str]) -> list[list[str]]:
        """The cells as text, one list per size."""
        return [[self.cell((size, edge), mark, pub) for edge in self.edges] for size in self.sizes]

    def to_csv(self) -> str:
        """Plain numbers: a column per block edge, and one per edge for the published value."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        names = [f"block_edge={'none' if e is None else e}" for e in self.edges]
        header = ["size", *names]
        if self.published:
            header += [f"{name} published" for name in names]
        writer.writerow(header)
        for size in self.sizes:
            line = [size_label(size)] + [_csv_number(self.ours.get((size, e))) for e in self.edges]
            if self.published:
                line += [_csv_number(self.published.get((size, e))) for e in self.edges]
            writer.writerow(line)
        return buf.getvalue()

    def to_markdown(self) -> str:
        mark = lambda marks: "".join(f" ⚠{m}" for m in marks)
        pub = lambda text: f" ({text})"
        head = "| size \\ block edge | " + " | ".join(edge_label(e) for e in self.edges) + " |"
        rule = "|---|" + "---:|" * len(self.edges)
        body = [
            f"| {size_label(size)} | " + " | ".join(cells) + " |"
            for size, cells in zip(self.sizes, self.grid(mark, pub), strict=True)
        ]
        return "\n".join([f"**{self.title}** — {self.legend}", "", head, rule, *body, ""])

    def to_html(self, csv_href: str) -> str:
        mark = lambda marks: "".join(f"<sup class='warn'>⚠{m}</sup>" for m in marks)
        pub = lambda text: f" <span class='pub'>({text})</span>"
        esc = html.escape
        head = "".join(f"<th>{esc(edge_label(e))}</th>" for e in self.edges)
        body = []
        for size, cells in zip(self.sizes, self.grid(mark, pub), strict=True):
            tds = "".join(f"<td>{c}</td>" for c in cells)
            body.append(f"<tr><th>{esc(size_label(size))}</th>{tds}</tr>")
        return (
            f"<table><caption>{esc(self.title)}<br><small>{esc(self.legend)} · "
            f"<a href='{esc(csv_href)}'>CSV</a></small></caption>"
            f"<thead><tr><th>size \\ block edge</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )


def _short(value: float) -> str:
    """A bar label: three significant digits at most, never exponents."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2f}"


def _csv_number(value: float | None) -> str:
    # Seven significant digits: more than any timing here resolves, and no
    # 0.30000000000000004 from summed times.
    return "" if value is None else f"{value:.7g}"


def published_metric(section: Section, kernel: str, metric: Metric) -> str | None:
    """The published metric (reference.METRICS) shown beside ``metric`` of ``kernel``."""
    mapping = section.layout.published_metrics
    if is_cpu_kernel(kernel):
        mapping = {PLAIN_OF_E2E.get(key, key): ref for key, ref in mapping.items()}
    return mapping.get(metric.key)


def _published_cells(section: Section, kernel: str, metric: Metric) -> tuple[dict[CellKey, float], list[str]]:
    ref_metric = published_metric(section, kernel, metric)
    if ref_metric is None:
        return {}, []
    if section.published is None:
        return {}, []
    found = section.published.values(kernel, ref_metric)
    cells = {(_size_of(section, n), block): value for (n, block), (value, _) in found.items()}
    devices = list(dict.fromkeys(device for _, device in found.values()))
    return cells, devices


def _size_of(section: Section, n: int) -> SizeKey:
    """Our size key for a document's N: N x N x N, or our one N x N shape with
    another K (the Brno copies and transposes are N x N with K = 1)."""
    ours = {size for size in (_row_size(r) for r in section.rows) if size[0] == size[1] == n}
    return ours.pop() if len(ours) == 1 else (n, n, n)


def _published_only_kernels(section: Section) -> list[tuple[str, str]]:
    """(lookup name, label) of kernels the document measured and this section lacks."""
    ours = {s.kernel for s in section.series}
    seen: dict[str, str] = {}
    for r in section.published_rows():
        name = r.kernel_id or r.kernel
        if name not in ours:
            seen.setdefault(name, r.label)
    return list(seen.items())


def metric_tables(section: Section) -> list[MetricTable]:
    """Every table of a section: per kernel, per metric with a value (ours or published).

    Series that differ only in host memory share their kernel figures, so
    those get one table (named without the host memory); only the end-to-end
    figures get a table per host memory.
    """
    published_only = dict(_published_only_kernels(section))
    subjects: list[tuple[str, Series | None]] = [(s.kernel, s) for s in section.series]
    subjects += [(name, None) for name in published_only]
    tables = []
    done: set[tuple[str, str]] = set()
    for kernel, series in subjects:
        for metric in METRICS:
            if series is None:
                label = published_only[kernel]
            else:
                label = series.label if metric.end_to_end else series.kernel_label
            if (label, metric.key) in done:
                continue
            done.add((label, metric.key))
            ours: dict[CellKey, float] = {}
            marks: dict[CellKey, list[int]] = {}
            if series is not None:
                for key, row in series.cells.items():
                    value = metric.value(row)
                    if value is not None:
                        ours[key] = value
                        marks[key] = section.notes.marks(row)
            published, devices = _published_cells(section, kernel, metric)
            if not ours and not published:
                continue
            keys = set(published) | (set(series.cells) if series else set())
            tables.append(
                MetricTable(
                    label=label,
                    kernel=kernel,
                    metric=metric,
                    sizes=sorted({size for size, _ in keys}),
                    edges=sorted({edge for _, edge in keys}, key=_edge_order),
                    ours=ours,
                    published=published,
                    marks=marks,
                    our_device=section.gpu_name,
                    published_devices=devices,
                )
            )
    # Keep each label's tables together (kernel figures, then end to end).
    first = {t.label: i for i, t in reversed(list(enumerate(tables)))}
    return sorted(tables, key=lambda t: first[t.label])


# --------------------------------------------------------------------------
# Plots


@dataclass(frozen=True)
class Plot:
    file: str  # relative to the section's directory
    caption: str


def _figure(nrows: int = 1, ncols: int = 1, width: float | None = None, height: float | None = None) -> tuple:
    # A bare Figure renders PNGs with Agg and leaves pyplot's backend alone
    # (a notebook keeps its own), and needs no display.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width or 6.0 * ncols, height or 4.2 * nrows), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _save(fig: Any, out: Path, name: str, caption: str) -> Plot:
    fig.savefig(out / name, dpi=DPI)
    return Plot(name, caption)


def _x(size: SizeKey) -> float:
    """Where a size sits on a size axis: N for N x N, the geometric mean otherwise."""
    m, n, k = size
    return float(n) if m == n else (m * n * k) ** (1 / 3)


@dataclass(frozen=True)
class SizeScale:
    """A size axis: log2 where the sizes span a factor of 8 or more, evenly
    spaced where some sit too close to label apart (1000, 1023, 1025)."""

    sizes: tuple[SizeKey, ...]
    kind: str  # "linear", "log" or "even"

    @classmethod
    def of(cls, sizes: Iterable[SizeKey]) -> SizeScale:
        ordered = tuple(sorted(set(sizes), key=_x))
        xs = [_x(size) for size in ordered]
        kind = "log" if len(xs) > 1 and xs[-1] / xs[0] >= 8 else "linear"
        t = [math.log2(x) for x in xs] if kind == "log" else xs
        if len(t) > 2 and min(b - a for a, b in itertools.pairwise(t)) < 0.12 * (t[-1] - t[0]):
            kind = "even"
        return cls(ordered, kind)

    def x(self, size: SizeKey) -> float:
        return float(self.sizes.index(size)) if self.kind == "even" else _x(size)

    def apply(self, ax: Any) -> None:
        from matplotlib.ticker import NullLocator

        if self.kind == "log":
            ax.set_xscale("log", base=2)
        ax.set_xticks([self.x(size) for size in self.sizes], labels=[size_label(size) for size in self.sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("matrix size N (N×N)" + (", evenly spaced" if self.kind == "even" else ""))


def _edge_axis(ax: Any, edges: Sequence[int]) -> None:
    from matplotlib.ticker import NullLocator

    ax.set_xscale("log", base=2)
    ax.set_xticks(list(edges), labels=[str(e) for e in edges])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("block edge b (threads per block: b×b)")


def _value_axis(ax: Any, metric: Metric, values: Iterable[float]) -> None:
    values = [v for v in values if v and v > 0]
    if values and max(values) / min(values) > 30:
        _log_scale(ax, "y", min(values), max(values))
    ax.set_ylabel(f"{metric.short} [{metric.unit}]")
    ax.grid(True, which="major", alpha=0.3)


def _log_scale(ax: Any, which: str, lo: float, hi: float) -> None:
    """Make ``ax``'s x or y axis logarithmic, labelled with plain numbers (0.5,
    20, 1000) rather than powers of ten; over fewer than three decades the ticks
    also fall on 2 and 5."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log") if which == "x" else ax.set_yscale("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    subs = (1.0, 2.0, 5.0) if hi / lo < 1e3 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _legend(ax: Any, title: str | None = None, outside: bool = False) -> None:
    if not ax.get_legend_handles_labels()[0]:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    if outside:
        ax.legend(title=title, fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    else:
        ax.legend(title=title, fontsize="small")


def _published_series(section: Section, kernel: str, metric: Metric) -> tuple[dict[CellKey, float], str]:
    cells, devices = _published_cells(section, kernel, metric)
    return cells, "; ".join(devices)


def _published_pick(
    section: Section, kernel: str, metrics: Sequence[Metric]
) -> tuple[Metric | None, dict[CellKey, float], str]:
    """The first of ``metrics`` with published figures for ``kernel``, with them."""
    for metric in metrics:
        cells, devices = _published_series(section, kernel, metric)
        if cells:
            return metric, cells, devices
    return None, {}, ""


def _cells_of(series: Series, metric: Metric) -> dict[CellKey, float]:
    return {key: v for key, row in series.cells.items() if (v := metric.value(row)) is not None}


def _shared_legend(fig: Any, axes: Any, title: str, order: Sequence[str]) -> None:
    """One legend for all panels, right of them, in ``order``."""
    handles: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
        if not ax.get_legend_handles_labels()[0]:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
    labels = [label for label in order if label in handles]
    if labels:
        fig.legend([handles[x] for x in labels], labels, title=title, loc="outside right upper", fontsize="small")


def plot_vs_size(section: Section, out: Path) -> list[Plot]:
    """Per kernel: time and GFLOPS (or GB/s) against size, a line per block edge;
    a second row with the document's figures where it has them."""
    headline = section.headline()
    metrics = (TIME, headline)
    plots = []
    for s in section.series:
        published = [_published_series(section, s.kernel, m) for m in metrics]
        panel_rows = [(f"ours, {section.gpu_name}", [_cells_of(s, m) for m in metrics])]
        if any(cells for cells, _ in published):
            devices = "; ".join(dict.fromkeys(dev for cells, dev in published if cells))
            panel_rows.append((f"published, {devices}", [cells for cells, _ in published]))
        edges = sorted({e for _, cells in panel_rows for c in cells for _, e in c}, key=_edge_order)
        colour = {e: f"C{i % 10}" for i, e in enumerate(edges)}
        fig, axes = _figure(len(panel_rows), 2, width=12.5, height=4.0 * len(panel_rows) + 0.5)
        for r, (who, cells_per_metric) in enumerate(panel_rows):
            for c, (metric, cells) in enumerate(zip(metrics, cells_per_metric, strict=True)):
                ax = axes[r][c]
                scale = SizeScale.of({size for size, _ in cells} or s.sizes())
                for edge in sorted({e for _, e in cells}, key=_edge_order):
                    pts = sorted((size, v) for (size, e), v in cells.items() if e == edge)
                    ax.plot(
                        [scale.x(size) for size, _ in pts],
                        [v for _, v in pts],
                        marker="o",
                        color=colour[edge],
                        label=f"b = {edge_label(edge)}",
                    )
                scale.apply(ax)
                _value_axis(ax, metric, cells.values())
                ax.set_title(f"{metric.title}, {who}", fontsize="medium")
        _shared_legend(fig, axes, "block edge", [f"b = {edge_label(e)}" for e in edges])
        fig.suptitle(f"{s.label}: time and {headline.title} against size")
        caption = f"{s.label}: kernel time and {headline.title} against matrix size, a line per block edge"
        if len(panel_rows) > 1:
            caption += " (bottom: the document's figures)"
        plots.append(_save(fig, out, f"{slug(s.label)}_vs_size.png", caption))
    return plots


def plot_time_vs_edge(section: Section, out: Path, kernels: Sequence[str]) -> list[Plot]:
    """Per kernel: time against block edge, a line per size (the document's
    layout), the document's figures in a second panel."""
    plots = []
    for s in section.series:
        if s.kernel not in kernels or len([e for e in s.edges() if e is not None]) < 2:
            continue
        # Ours in the document's kind of time where we have it (Kursk: end to end).
        pub_metric, pub, pub_dev = _published_pick(section, s.kernel, (E2E_TIME, TIME))
        metric = pub_metric if pub_metric is not None and s.has(pub_metric) else TIME
        how = "end to end" if metric is E2E_TIME else "kernel only"
        panels = [(f"ours, {section.gpu_name} ({how})", _cells_of(s, metric))]
        if pub:
            panels.append((f"published, {pub_dev}", pub))
        sizes = sorted({size for _, cells in panels for size, _ in cells})
        colour = {size: f"C{i % 10}" for i, size in enumerate(sizes)}
        fig, axes = _figure(1, len(panels), width=5.5 * len(panels) + 1.5, height=4.5)
        for ax, (who, cells) in zip(axes[0], panels, strict=True):
            edges = sorted({e for _, e in cells if e is not None})
            for size in sorted({sz for sz, _ in cells}):
                pts = sorted((e, v) for (sz, e), v in cells.items() if sz == size and e is not None)
                ax.plot(
                    [e for e, _ in pts],
                    [v for _, v in pts],
                    marker="o",
                    color=colour[size],
                    label=size_text(size),
                )
            _edge_axis(ax, edges)
            _value_axis(ax, metric, cells.values())
            ax.set_title(who, fontsize="medium")
        _shared_legend(fig, axes, "matrix size", [size_text(size) for size in sizes])
        fig.suptitle(f"{s.label}: time against block edge")
        caption = f"{s.label}: time against block edge, a line per matrix size"
        plots.append(_save(fig, out, f"{slug(s.label)}_time_vs_edge.png", caption))
    return plots


@dataclass
class _Line:
    """A line against size, drawn once all lines of an axis are known."""

    points: list[tuple[SizeKey, float]]
    style: dict[str, Any]


def _draw_lines(ax: Any, lines: list[_Line]) -> SizeScale:
    scale = SizeScale.of(size for line in lines for size, _ in line.points)
    for line in lines:
        pts = sorted(line.points, key=lambda p: _x(p[0]))
        ax.plot([scale.x(size) for size, _ in pts], [v for _, v in pts], **line.style)
    scale.apply(ax)
    return scale


def plot_speedup(section: Section, out: Path, slow: str, fast: str, edge: int) -> list[Plot]:
    """slow-kernel time / fast-kernel time against size at one block edge, ours and published."""
    lines = []
    s_slow, s_fast = section.kernel_series(slow), section.kernel_series(fast)
    if s_slow and s_fast:
        pts = []
        for size in set(s_slow.sizes()) & set(s_fast.sizes()):
            a, b = s_slow.value(TIME, size, edge), s_fast.value(TIME, size, edge)
            if a is not None and b:
                pts.append((size, a / b))
        if pts:
            lines.append(_Line(pts, {"marker": "o", "color": "C0", "label": f"ours, {section.gpu_name}"}))
    pub_slow, dev = _published_series(section, slow, TIME)
    pub_fast, _ = _published_series(section, fast, TIME)
    pts = [
        (size, pub_slow[(size, e)] / v)
        for (size, e), v in pub_fast.items()
        if e == edge and v and (size, e) in pub_slow
    ]
    if pts:
        lines.append(_Line(pts, {"marker": "s", "ls": "--", "color": "C1", "label": f"published, {dev}"}))
    if not lines:
        return []
    fig, axes = _figure(width=7.5, height=4.5)
    ax = axes[0][0]
    _draw_lines(ax, lines)
    ax.axhline(1.0, color="grey", ls=":", lw=1)
    ax.set_ylabel(f"speed-up: {slow} time / {fast} time [×]")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"Shared-memory speed-up at block edge {edge}")
    _legend(ax)
    caption = f"Speed-up of {fast} over {slow} at block edge {edge} against size (above 1: shared memory wins)"
    return [_save(fig, out, f"speedup_{slug(fast)}_over_{slug(slow)}.png", caption)]


def plot_cpu_gpu(section: Section, out: Path) -> list[Plot]:
    """GFLOPS against N for the CPU baselines and each GPU kernel (its best block
    edge), end to end where the copies were timed; the paper's figures dashed."""
    lines = []
    colours: dict[str, str] = {}
    drawn: set[str] = set()
    for s in section.series:
        metric = E2E_GFLOPS if s.has(E2E_GFLOPS) else GFLOPS
        pts = [(size, best[0]) for size in s.sizes() if (best := s.best(metric, size))]
        if not pts:
            continue
        how = "CPU" if is_cpu_kernel(s.kernel) else ("end to end" if metric is E2E_GFLOPS else "kernel only")
        if len(s.edges()) > 1:
            how += ", best block edge"
        # A kernel's second series (pageable host memory, say) keeps its colour, in another style.
        again = s.kernel in drawn
        drawn.add(s.kernel)
        colour = colours.setdefault(s.kernel, f"C{len(colours) % 10}")
        style = {"marker": "s" if again else "o", "ls": "-." if again else "-", "color": colour}
        lines.append(_Line(pts, {**style, "label": f"{s.label} ({how})"}))
    # One dashed line per kernel, even where it has a series per host memory.
    subjects = {s.kernel: s.kernel for s in section.series} | dict(_published_only_kernels(section))
    for kernel, label in subjects.items():
        _, pub, dev = _published_pick(section, kernel, (E2E_GFLOPS, GFLOPS))
        if not pub:
            continue
        best: dict[SizeKey, float] = {}
        for (size, _), v in pub.items():
            best[size] = max(v, best.get(size, v))
        colour = colours.setdefault(kernel, f"C{len(colours) % 10}")
        style = {"marker": "x", "ls": "--", "color": colour, "label": f"published {label} ({dev})"}
        lines.append(_Line(list(best.items()), style))
    if not lines:
        return []
    fig, axes = _figure(width=10.5, height=5.0)
    ax = axes[0][0]
    _draw_lines(ax, lines)
    _value_axis(ax, GFLOPS, [v for line in lines for _, v in line.points])
    fig.suptitle(f"CPU against GPU: ours on {section.gpu_name} (solid), published (dashed)")
    _legend(ax, outside=True)
    caption = "GFLOPS against N: CPU baselines and GPU kernels, end to end (copies included) where timed"
    return [_save(fig, out, "cpu_vs_gpu.png", caption)]


def _bandwidth_size(section: Section) -> SizeKey | None:
    """The document's size (4000) if we measured it, else our largest."""
    sizes = {size for s in section.series for size in s.sizes() if s.has(BANDWIDTH)}
    if not sizes:
        return None
    doc = {_size_of(section, r.n) for r in section.published_rows()}
    return max(sizes & doc) if sizes & doc else max(sizes)


def plot_bandwidth_bars(section: Section, out: Path) -> list[Plot]:
    """GB/s per kernel, ours beside the document's, absolute and as a fraction
    of each device's plain copy."""
    size = _bandwidth_size(section)
    ours: dict[str, float] = {}
    if size is not None:
        for s in section.series:
            if (best := s.best(BANDWIDTH, size)) is not None:
                ours[s.label] = best[0]
    pub: dict[str, float] = {}
    pub_devices: list[str] = []
    for r in section.published_rows():
        if r.report_metric == "gbs":
            pub[r.label] = r.report_value
            pub_devices.append(r.device)
    labels = list(dict.fromkeys([*pub, *ours]))
    if not labels:
        return []
    dev = "; ".join(dict.fromkeys(pub_devices)) or "no published figures"
    fig, axes = _figure(1, 2, width=13.0, height=5.0)
    width = 0.4
    xs = range(len(labels))
    for c, fraction in enumerate((False, True)):
        ax = axes[0][c]
        for j, (who, data, colour) in enumerate(
            ((f"ours, {section.gpu_name}", ours, "C0"), (f"published, {dev}", pub, "C1"))
        ):
            base = data.get("copy") if fraction else 1.0
            if not base:
                continue
            heights = [data.get(label, 0.0) / base for label in labels]
            bars = ax.bar([x + (j - 0.5) * width for x in xs], heights, width, color=colour, label=who)
            ax.bar_label(bars, labels=[_short(h) if h else "" for h in heights], fontsize="x-small", padding=2)
        ax.set_xticks(
            list(xs),
            labels=[label.replace(" (no gemmlab", "\n(no gemmlab") for label in labels],
            rotation=30,
            ha="right",
            fontsize="small",
        )
        ax.grid(True, axis="y", alpha=0.3)
        if fraction:
            ax.set_ylabel("fraction of the same device's copy bandwidth")
            ax.set_title("Relative to each device's plain copy", fontsize="medium")
            ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
        else:
            every = [v for v in (*ours.values(), *pub.values()) if v > 0]
            if every and max(every) / min(every) > 30:
                _log_scale(ax, "y", min(every), max(every))
                ax.set_ylim(min(every) / 1.5, max(every) * 2.0)  # room for the labels
            ax.set_ylabel("bandwidth [GB/s] (bytes read + written / time)")
            ax.set_title("Absolute", fontsize="medium")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=2, fontsize="small")
    where = f"{size_text(size)}, best tile edge" if size else "no size measured"
    fig.suptitle(f"Transpose and copy bandwidth ({where})")
    return [
        _save(
            fig, out, "bandwidth_bars.png", f"Bandwidth of copies and transposes, ours beside the document's ({where})"
        )
    ]


def plot_compare_largest(section: Section, out: Path) -> list[Plot]:
    """All kernels side by side at their largest size, a bar per block edge."""
    headline = section.headline()
    picks: dict[str, tuple[Series, SizeKey]] = {}
    for s in section.series:
        sizes = [size for size in s.sizes() if any(s.value(headline, size, e) is not None for e in s.edges())]
        # Series that differ in host memory only have the same kernel figures: show one.
        if sizes and s.kernel_label not in picks:
            picks[s.kernel_label] = (s, max(sizes))
    if not picks:
        return []
    one_size = len({size for _, size in picks.values()}) == 1
    fig, axes = _figure(width=max(7.0, 1.2 * len(picks) + 3.0), height=5.0)
    ax = axes[0][0]
    all_edges = sorted({e for s, size in picks.values() for e in s.edges()}, key=_edge_order)
    colour = {edge: f"C{j % 10}" for j, edge in enumerate(all_edges)}
    handles: dict[Edge, Any] = {}
    values = []
    for i, (s, size) in enumerate(picks.values()):
        # Each kernel's bars are packed and centred on its tick, whatever edges it has.
        bars = [(e, v) for e in s.edges() if (v := s.value(headline, size, e)) is not None]
        width = 0.8 / len(bars)
        for j, (edge, v) in enumerate(bars):
            x = i + (j - (len(bars) - 1) / 2) * width
            handles[edge] = ax.bar(x, v, width, color=colour[edge])
            values.append(v)
    labels = [label if one_size else f"{label}\n{size_text(size)}" for label, (_, size) in picks.items()]
    tilt = len(picks) > 4 or max(len(label) for label in picks) > 14
    ax.set_xticks(
        range(len(picks)), labels=labels, rotation=25 if tilt else 0, ha="right" if tilt else "center", fontsize="small"
    )
    _value_axis(ax, headline, values)
    at = size_text(next(iter(picks.values()))[1]) if one_size else "each kernel's largest size"
    ax.set_title(f"All kernels at {at}, {section.gpu_name}")
    shown = [e for e in all_edges if e in handles]
    ax.legend(
        [handles[e] for e in shown],
        [f"b = {e}" if e is not None else "no block edge" for e in shown],
        title="block edge",
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    return [_save(fig, out, "compare_largest.png", f"{headline.title} of every kernel at {at}, a bar per block edge")]


def plot_published_vs_ours(section: Section, out: Path) -> list[Plot]:
    """Ours against the document's, one point per (kernel, size, block edge) they
    share, on log axes with the diagonals where the ratio is 1, 10, 100, ..."""
    # One panel per published metric; a kernel's point uses the metric of ours
    # that sits beside it (Kursk: end to end for the GPU, plain for the CPU).
    found: dict[str, tuple[dict[str, list[tuple[float, float]]], list[str], list[Metric]]] = {}
    for s in section.series:
        for metric in METRICS:
            ref = published_metric(section, s.kernel, metric)
            if ref is None:
                continue
            pub, dev = _published_series(section, s.kernel, metric)
            points, devices, used = found.setdefault(ref, ({}, [], []))
            for (size, edge), p in pub.items():
                ours = s.value(metric, size, edge)
                if ours is None and edge is None:
                    # The document did not state the block: match our best edge at this size
                    # (the documents report their best configuration).
                    values = [v for e in s.edges() if (size, e) in s.cells and (v := s.value(metric, size, e))]
                    best = max if metric.higher_is_better else min
                    ours = best(values) if values else None
                if ours is not None and ours > 0 and p > 0:
                    points.setdefault(s.label, []).append((p, ours))
                    devices.append(dev)
                    used.append(metric)
    panels = [(ref, *found[ref]) for ref in METRIC_TITLES if ref in found and found[ref][0]]
    if not panels:
        return []
    ncols = min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = _figure(nrows, ncols, width=5.6 * ncols, height=5.4 * nrows + 0.6)
    # One style per kernel across the panels, so that one legend serves them all.
    labels = list(dict.fromkeys(label for _, points, _, _ in panels for label in points))
    markers = "osD^v<>pP*X"
    style = {label: (f"C{i % 10}", markers[i % len(markers)]) for i, label in enumerate(labels)}
    handles = {}
    for idx, (ref, points, devices, used) in enumerate(panels):
        ax = axes[idx // ncols][idx % ncols]
        every = [v for pts in points.values() for pair in pts for v in pair]
        lo, hi = min(every) / 2, max(every) * 2
        for label, pts in points.items():
            colour, marker = style[label]
            handles[label] = ax.scatter([p for p, _ in pts], [o for _, o in pts], marker=marker, color=colour)
        _log_scale(ax, "x", lo, hi)
        _log_scale(ax, "y", lo, hi)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        _diagonals(ax, lo, hi)
        title, unit = METRIC_TITLES[ref]
        if any(m in (E2E_TIME, E2E_GFLOPS) for m in used):
            title += " (GPU: end to end)"
        ax.set_xlabel(f"published [{unit}]\n{'; '.join(dict.fromkeys(devices))}")
        ax.set_ylabel(f"ours [{unit}], {section.gpu_name}")
        better = "above" if used[0].higher_is_better else "below"
        ax.set_title(f"{title}\n{better} the solid diagonal: ours is better", fontsize="medium")
        ax.grid(True, alpha=0.2)
    for idx in range(len(panels), nrows * ncols):
        axes[idx // ncols][idx % ncols].set_visible(False)
    fig.legend(
        [handles[label] for label in labels],
        labels,
        title="kernel",
        loc="outside lower center",
        # Two legend columns per panel column keep the legend inside the figure.
        ncols=min(2 * ncols, len(labels)),
        fontsize="small",
    )
    fig.suptitle(f"{section.experiment}: ours against the published figures")
    caption = (
        "Each point is one kernel, size and block edge measured both by the document and by us "
        "(where the document gives no block edge, our best edge at that size)"
    )
    return [_save(fig, out, "published_vs_ours.png", caption)]


def _diagonals(ax: Any, lo: float, hi: float) -> None:
    """Lines where ours = ratio x published, for ratio 1 (solid) and powers of ten."""
    for power in range(-8, 9):
        ratio = 10.0**power
        start, stop = max(lo, lo / ratio), min(hi, hi / ratio)
        if stop <= start:
            continue  # this diagonal misses the plotted square
        ax.plot(
            [lo, hi],
            [lo * ratio, hi * ratio],
            color="grey",
            lw=0.9 if power == 0 else 0.5,
            ls="-" if power == 0 else ":",
        )
        # Label the diagonals with room for it, in the middle of the visible part.
        if power and math.log(stop / start) > 0.3 * math.log(hi / lo):
            x_mid = math.sqrt(start * stop)
            ax.text(
                x_mid,
                x_mid * ratio,
                f"{ratio:g}×",
                fontsize="x-small",
                color="grey",
                rotation=45,
                ha="center",
                va="bottom",
            )


def roofline_ceilings(section: Section) -> tuple[float, float] | None:
    """(GFLOP/s, GB/s) measured on the section's GPU by its latest run that has them
    (`--profile` measures them: cuBLAS SGEMM and a device-to-device copy)."""
    found = [
        (str(r.get("date") or ""), peak, bandwidth)
        for r in section.rows
        if (peak := _number(r.get("peak_gflops_measured"))) and (bandwidth := _number(r.get("bandwidth_gbs_measured")))
    ]
    if not found:
        return None
    _, peak, bandwidth = max(found)
    return peak, bandwidth


def roofline_points(section: Section) -> list[Row]:
    """One point per profiled GPU point: the FLOP model 2·M·N·K over the DRAM
    bytes Nsight Compute counted, and the GFLOPS of the timed runs. Memory-bound
    kernels (GB/s rows) do no arithmetic and are left out; the pinned and
    pageable rows of an end-to-end point share the kernel, so they give one point."""
    points: dict[tuple, Row] = {}
    for s in section.series:
        if is_cpu_kernel(s.kernel):
            continue
        for ((m, n, k), edge), row in s.cells.items():
            dram_bytes, achieved = _number(row.get("dram_bytes")), GFLOPS.value(row)
            if dram_bytes and achieved:
                points.setdefault((s.kernel_label, m, n, k, edge), {
                    "label": s.kernel_label, "arithmetic_intensity": 2 * m * n * k / dram_bytes, "gflops": achieved,
                    "m": m, "n": n, "k": k, "block_edge": edge,
                })  # fmt: skip
    return list(points.values())


# Beyond this many points the per-point labels (block edge, size) hide the markers.
ROOFLINE_ANNOTATED = 16


def plot_roofline(section: Section, out: Path) -> list[Plot]:
    """Achieved GFLOPS against arithmetic intensity under the two measured
    ceilings, a marker per kernel; drawn where the section has profiler DRAM
    bytes and its run measured the ceilings."""
    from gemmlab.measure.roofline import roofline_plot

    ceilings = roofline_ceilings(section)
    points = roofline_points(section)
    if ceilings is None or not points:
        return []
    peak, bandwidth = ceilings
    title = f"{section.experiment}: roofline on {section.gpu_name}"
    roofline_plot(points, peak, bandwidth, out / "roofline.png", title, annotate=len(points) <= ROOFLINE_ANNOTATED,
                  dpi=DPI)  # fmt: skip
    caption = (
        "Roofline: achieved GFLOPS against arithmetic intensity (2·M·N·K FLOPs per byte of DRAM traffic that "
        f"Nsight Compute counted, L2 flushed), a marker per kernel, under the ceilings measured on this GPU: "
        f"cuBLAS SGEMM {peak:,.0f} GFLOP/s and a device-to-device copy {bandwidth:,.0f} GB/s"
    )
    if any(r.get("dtype") == "int32" for r in section.rows):
        caption += "; int32 kernels count operations, against the float32 ceiling"
    return [Plot("roofline.png", caption)]


# --------------------------------------------------------------------------
# Layouts: the plot kinds an experiment's layout names, and the layout of
# results that belong to no document


PLOTS: dict[str, Callable[..., list[Plot]]] = {
    "vs_size": plot_vs_size,
    "time_vs_edge": plot_time_vs_edge,
    "speedup": plot_speedup,
    "cpu_gpu": plot_cpu_gpu,
    "bandwidth_bars": plot_bandwidth_bars,
    "compare_largest": plot_compare_largest,
    "published_vs_ours": plot_published_vs_ours,
}
# Results of a plain sweep, or rows of a notebook's own, have no document.
SWEEP_LAYOUT = Layout("Results", (plot("vs_size"), plot("compare_largest")))


def draw(spec: PlotSpec, section: Section, out: Path) -> list[Plot]:
    """The plots of one of a layout's plot specs."""
    try:
        fn = PLOTS[spec.kind]
    except KeyError:
        raise UnknownName(
            f"The layout of {section.experiment} names a plot kind '{spec.kind}' that the report does not draw.",
            f"Use one of {', '.join(PLOTS)} (report PLOTS), or add the plot function there.",
        ) from None
    return fn(section, out, **dict(spec.options))


# --------------------------------------------------------------------------
# Theoretical occupancy


@dataclass
class OccupancyBlock:
    title: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str, list[str]]] = field(default_factory=list)
    note: str = ""


def _occupancy_for(kernel: str, cc: str, edges: list[int] | None, label: str) -> OccupancyBlock:
    from gemmlab.core.arch import parse_cc
    from gemmlab.measure.kernel_occupancy import OLDEST_NVRTC_ARCH, compile_arch_for, kernel_occupancy
    from gemmlab.measure.occupancy import occupancy_table

    block = OccupancyBlock(label)
    try:
        major, minor = parse_cc(cc)
        arch = compile_arch_for(cc)
        columns = kernel_occupancy(kernel, arch, edges, cc=f"{major}.{minor}")
        block.columns = [name for name, _ in columns] + ["device limit"]
        block.rows = occupancy_table(columns)
        if arch == OLDEST_NVRTC_ARCH and (major, minor) < (7, 5):
            block.note = f"Registers and shared memory from an {arch} compile, under the rules of {major}.{minor}."
    except (GemmlabError, ImportError) as exc:
        # ImportError: the CUDA Python packages that hold NVRTC are missing.
        block.note = f"No occupancy table: {exc}"
    return block


def occupancy_blocks(section: Section) -> list[OccupancyBlock]:
    """Per catalogue kernel of the section: its theoretical occupancy on our GPU
    (and on the document's, where the layout names it)."""
    cc = section.cc
    blocks = []
    for kernel in dict.fromkeys(s.kernel for s in section.series):
        if kernel not in catalogue.kernel_ids():
            continue  # CPU baselines and kernels from outside the catalogue
        edges = sorted({e for s in section.series if s.kernel == kernel for e in s.edges() if e is not None})
        targets = [(cc, f"{kernel} on {section.gpu_name} (compute capability {cc})")] if cc else []
        if section.layout.document_cc:
            doc = section.layout.document_cc
            targets.append((doc, f"{kernel} on the document's GPU (compute capability {doc})"))
        if not targets:
            blocks.append(OccupancyBlock(kernel, note="No occupancy table: the rows carry no compute capability."))
        blocks += [_occupancy_for(kernel, target, edges or None, title) for target, title in targets]
    return blocks


# --------------------------------------------------------------------------
# Writing


def _read_rows(source: list[Row] | str | Path) -> list[Row]:
    if not isinstance(source, str | Path):
        return list(source)
    path = Path(source)
    if not path.is_file():
        raise GemmlabError(
            f"No results database at {path}.",
            "Run `gemmlab reproduce` or `gemmlab sweep` first, or point --db at an existing database.",
        )
    from gemmlab.results.store import Store

    with Store.open(path, readonly=True) as store:
        return store.rows()


def write_report(
    rows: list[Row] | str | Path,
    out_dir: str | Path,
    experiments: list[str] | None = None,
    occupancy: bool = True,
) -> Path:
    """Write tables (Markdown, CSV), plots (PNG) and ``index.html`` to ``out_dir``.

    ``rows`` are the store's dicts (keys: experiment, kernel, m, n, k,
    block_edge, dtype, variant, median_ms, gflops, gbytes_per_s, metric, gips,
    cgma_measured, cgma_analytic, h2d_ms, d2h_ms, e2e_gflops, host_memory,
    warnings, gpu_name, cc, date, ...; any may be None) or the path of a
    results database. The report is built in a temporary directory beside
    ``out_dir`` and moved into place, so a failure leaves nothing half
    written; an existing previous report at ``out_dir`` is replaced. Returns
    the path of ``index.html``.
    """
    sections = build_sections(_read_rows(rows), experiments)
    out = Path(out_dir).expanduser().absolute()
    staging, created = _staging_dir(out)
    try:
        _render(sections, staging, occupancy)
        (staging / MARKER).write_text("written by gemmlab report; the next report may replace this directory\n")
        os.chmod(staging, 0o755)
        _move_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return out / "index.html"


def _unwritable(out: Path, exc: OSError) -> GemmlabError:
    return GemmlabError(
        f"Cannot write the report to {out}: {exc.strerror or exc}.",
        "Choose a directory you can write to with --out.",
    )


def _staging_dir(out: Path) -> tuple[Path, Path | None]:
    """A fresh directory beside ``out`` (same file system, so the move is a
    rename), and the first parent directory this call had to create."""
    if out.exists():
        if not out.is_dir():
            raise GemmlabError(f"{out} is a file, not a directory.", "Give --out a directory path.")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise GemmlabError(
                f"{out} already holds files that are not a gemmlab report.",
                "Give --out a new or empty directory; gemmlab replaces only reports it wrote.",
            )
    nearest = next((p for p in out.parents if p.exists()), None)
    if nearest is not None and not nearest.is_dir():
        # mkdir would only say "File exists"; name the file that is in the way.
        raise GemmlabError(f"Cannot write the report to {out}: {nearest} is a file, not a directory.",
                           "Choose a directory you can write to with --out.")  # fmt: skip
    created = next((p for p in reversed(out.parents) if not p.exists()), None)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)), created
    except OSError as exc:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise _unwritable(out, exc) from None


def _move_into_place(staging: Path, out: Path) -> None:
    old = staging.with_suffix(".old")
    try:
        if out.exists():
            os.rename(out, old)
        try:
            os.rename(staging, out)
        except OSError:
            if old.exists():
                os.rename(old, out)
            raise
    except OSError as exc:
        raise _unwritable(out, exc) from None
    shutil.rmtree(old, ignore_errors=True)


@dataclass
class _SectionOutput:
    section: Section
    tables: list[MetricTable]
    plots: list[Plot]
    occupancy: list[OccupancyBlock]


def _render(sections: list[Section], root: Path, occupancy: bool) -> None:
    outputs = []
    for section in sections:
        sdir = root / section.slug
        sdir.mkdir()
        tables = metric_tables(section)
        for t in tables:
            (sdir / f"{t.file_stem}.csv").write_text(t.to_csv(), encoding="utf-8")
        # Every section gets a roofline where it has the data for one.
        plots = [p for spec in section.layout.plots for p in draw(spec, section, sdir)] + plot_roofline(section, sdir)
        blocks = occupancy_blocks(section) if occupancy else []
        (sdir / "tables.md").write_text(_markdown(section, tables), encoding="utf-8")
        if section.notes.texts:
            (sdir / "warnings.csv").write_text(_warnings_csv(section), encoding="utf-8")
        outputs.append(_SectionOutput(section, tables, plots, blocks))
    (root / "index.html").write_text(_index_html(outputs), encoding="utf-8")


def _summary(section: Section) -> str:
    cc = f" (compute capability {section.cc})" if section.cc else ""
    devices = section.published.devices() if section.published else []
    pub = f"; published figures: {'; '.join(devices)}" if devices else ""
    return f"{section.gpu_name}{cc}, measured {section.dates}; {len(section.rows)} results{pub}"


def _markdown(section: Section, tables: list[MetricTable]) -> str:
    lines = [
        f"# {section.experiment} on {section.gpu_name}",
        "",
        section.layout.title,
        "",
        _summary(section),
        "",
        "Cells: ours (published). ⚠n marks a warning, listed at the end.",
        "",
    ]
    label = None
    for t in tables:
        if t.label != label:
            label = t.label
            lines += [f"## {label}", ""]
        lines += [t.to_markdown(), ""]
    if section.notes.texts:
        lines += ["## Warnings", ""] + [f"{i}. {text}" for i, text in enumerate(section.notes.texts, 1)] + [""]
    return "\n".join(lines)


def _warnings_csv(section: Section) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["mark", "kernel", "size", "block_edge", "warning"])
    for s in section.series:
        for (size, edge), row in sorted(s.cells.items(), key=lambda kv: (kv[0][0], _edge_order(kv[0][1]))):
            for text in row["warnings"]:
                writer.writerow([section.notes.mark(text), s.label, size_label(size), edge_label(edge), text])
    return buf.getvalue()


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 1.2em 1.2em 0; display: inline-table; vertical-align: top; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3em; }
caption small { font-weight: normal; color: #555; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; font-variant-numeric: tabular-nums; }
thead th { background: #f0f0f0; }
tbody th { background: #fafafa; }
.pub { color: #777; }
.warn { color: #b36b00; }
.summary { background: #f5f7fa; padding: 0.5em 0.8em; border-left: 4px solid #4a78b5; }
.note { color: #8a5a00; }
figure { display: inline-block; margin: 0.5em 1em 1em 0; vertical-align: top; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; max-width: 60em; }
section { border-top: 2px solid #ddd; margin-top: 2em; }
"""


def _index_html(outputs: list[_SectionOutput]) -> str:
    from gemmlab import __version__

    esc = html.escape
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    toc = "".join(
        f"<li><a href='#{esc(o.section.slug)}'>{esc(o.section.experiment)}</a>: {esc(_summary(o.section))}</li>"
        for o in outputs
    )
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>gemmlab report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>gemmlab report</h1>",
        f"<p>Written {esc(now)} by gemmlab {esc(__version__)}. Table cells read <b>ours</b> "
        "<span class='pub'>(published)</span>; the devices are named above each table. "
        "<span class='warn'>⚠n</span> marks a warning, listed at the end of its section.</p>",
        f"<ul>{toc}</ul>",
    ]
    for o in outputs:
        parts.append(_section_html(o))
    parts.append("</body></html>")
    return "\n".join(parts)


def _section_html(o: _SectionOutput) -> str:
    esc = html.escape
    s = o.section
    d = s.slug
    parts = [
        f"<section id='{esc(d)}'><h2>{esc(s.experiment)} on {esc(s.gpu_name)}</h2>",
        f"<p>{esc(s.layout.title)}</p>",
        f"<p class='summary'>{esc(_summary(s))}</p>",
        f"<p>All tables as Markdown: <a href='{esc(d)}/tables.md'>{esc(d)}/tables.md</a>"
        + (f"; warnings as CSV: <a href='{esc(d)}/warnings.csv'>{esc(d)}/warnings.csv</a>" if s.notes.texts else "")
        + "</p>",
    ]
    if o.plots:
        parts.append("<h3>Plots</h3>")
        for p in o.plots:
            src = f"{d}/{p.file}"
            parts.append(
                f"<figure><a href='{esc(src)}'><img src='{esc(src)}' alt='{esc(p.caption)}'></a>"
                f"<figcaption>{esc(p.caption)}</figcaption></figure>"
            )
    label = None
    parts.append("<h3>Tables</h3>")
    for t in o.tables:
        if t.label != label:
            label = t.label
            parts.append(f"<h4>{esc(label)}</h4>")
        parts.append(t.to_html(f"{d}/{t.file_stem}.csv"))
    if o.occupancy:
        parts.append("<h3>Theoretical occupancy</h3>")
        for b in o.occupancy:
            parts.append(_occupancy_html(b))
    if s.notes.texts:
        parts.append("<h3>Warnings</h3><ol>")
        parts += [f"<li class='warn'>{esc(text)}</li>" for text in s.notes.texts]
        parts.append("</ol>")
    parts.append("</section>")
    return "\n".join(parts)


def _occupancy_html(block: OccupancyBlock) -> str:
    esc = html.escape
    note = f"<br><small class='note'>{esc(block.note)}</small>" if block.note else ""
    if not block.rows:
        return f"<p><b>{esc(block.title)}</b>{note}</p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in block.columns)
    body = "".join(
        f"<tr><th>{esc(label)}</th>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>"
        for label, cells in block.rows
    )
    return (
        f"<table><caption>{esc(block.title)}{note}</caption>"
        f"<thead><tr><th>block</th>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
