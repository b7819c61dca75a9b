"""The report's tables: one per kernel and metric, in the documents' shape
(sizes as rows, block edges as columns, each cell "ours (published)"), as
Markdown, CSV and HTML; a section's Markdown file and warnings; and the
theoretical occupancy tables."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gemmlab.core.errors import GemmlabError
from gemmlab.kernels import catalogue
from gemmlab.report.model import (
    METRICS,
    CellKey,
    Edge,
    Metric,
    Row,
    Section,
    Series,
    SizeKey,
    edge_label,
    edge_order,
    published_cells,
    published_only_kernels,
    size_label,
    slug,
)
from gemmlab.store.records import config_text
from gemmlab.store.rows import predates_config
from gemmlab.store.schema import COMPILES_FROM, CONFIG_RECORDED_FROM
from gemmlab.studies import experiments as registry

if TYPE_CHECKING:
    from gemmlab.measure.occupancy import OccupancyResult


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
    # Cells whose published figure the document gave without a block edge, set
    # beside our best edge at that size (see place_published).
    unstated: set[CellKey] = field(default_factory=set)
    # Why some published figures stand alone ("— (published)"): what we did not run.
    missing_note: str = ""
    # Rows of an integer type: rates are printed as operations (GOPS), not FLOPs.
    integer: bool = False
    # Whether we ran the kernel at all (False: a kernel only the document measured).
    ran: bool = True

    @property
    def shown(self) -> Metric:
        """The metric as this table prints it (GOPS for integer rows)."""
        return self.metric.named(self.integer)

    @property
    def title(self) -> str:
        return f"{self.label}: {self.shown.title} [{self.shown.unit}]"

    @property
    def unmeasured(self) -> bool:
        """A kernel we ran with none of our figures for this metric: the table would
        be dashes beside the document's figures (GIPS and CGMA without `--profile`)."""
        return self.ran and not self.ours

    @property
    def file_stem(self) -> str:
        return f"{slug(self.label)}__{self.metric.key}"

    @property
    def legend(self) -> str:
        text = f"ours on {self.our_device}"
        if self.published:
            text += f" (published, {'; '.join(self.published_devices)})"
        return text

    @property
    def note(self) -> str:
        """What the reader needs to read the published figures: those moved beside
        our best edge (†), and why some stand alone (—)."""
        parts = []
        if self.unstated:
            parts.append(
                "† The document states no block edge for this figure; it sits beside our best edge at that size, "
                "since the documents report their best configuration."
            )
        if self.missing_note:
            parts.append(self.missing_note)
        return " ".join(parts)

    def cell(self, key: CellKey, mark: Callable[[list[int]], str], pub: Callable[[str], str]) -> str:
        """'ours' + warning marks + '(published)'; '—' where only the document measured it."""
        ours, published = self.ours.get(key), self.published.get(key)
        if ours is None and published is None:
            return ""
        text = "—" if ours is None else fmt(ours) + mark(self.marks.get(key, []))
        if published is None:
            return text
        return text + pub(fmt(published) + ("†" if key in self.unstated else ""))

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
        note = [self.note, ""] if self.note else []
        return "\n".join([f"**{self.title}** — {self.legend}", "", head, rule, *body, "", *note])

    def to_html(self, csv_href: str) -> str:
        mark = lambda marks: "".join(f"<sup class='warn'>⚠{m}</sup>" for m in marks)
        pub = lambda text: f" <span class='pub'>({text})</span>"
        esc = html.escape
        head = "".join(f"<th>{esc(edge_label(e))}</th>" for e in self.edges)
        body = []
        for size, cells in zip(self.sizes, self.grid(mark, pub), strict=True):
            tds = "".join(f"<td>{c}</td>" for c in cells)
            body.append(f"<tr><th>{esc(size_label(size))}</th>{tds}</tr>")
        note = f"<br><small class='note'>{esc(self.note)}</small>" if self.note else ""
        return (
            f"<table><caption>{esc(self.title)}<br><small>{esc(self.legend)} · "
            f"<a href='{esc(csv_href)}'>CSV</a></small>{note}</caption>"
            f"<thead><tr><th>size \\ block edge</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )


def _csv_number(value: float | None) -> str:
    # Seven significant digits: more than any timing here resolves, and no
    # 0.30000000000000004 from summed times.
    return "" if value is None else f"{value:.7g}"


def place_published(
    published: dict[CellKey, float], ours: dict[CellKey, float], higher_is_better: bool
) -> tuple[dict[CellKey, float], set[CellKey]]:
    """The published figures keyed where they sit beside ours, and the keys that moved.

    A figure the document gave without a block edge (edge None) would otherwise
    stand in a column of its own ("— (112.4)") beside our columns 16 and 32;
    where we have no cell without an edge at that size it moves beside our best
    edge there, the documents reporting their best configuration. A figure the
    document keyed by edge stays at that edge.
    """
    placed: dict[CellKey, float] = {}
    moved: set[CellKey] = set()
    for (size, edge), value in published.items():
        key = (size, edge)
        if edge is None and key not in ours:
            found = [(v, e) for (sz, e), v in ours.items() if sz == size]
            if found:
                pick = max if higher_is_better else min
                best = (size, pick(found, key=lambda item: item[0])[1])
                if best not in published:
                    key = best
                    moved.add(key)
        placed[key] = value
    return placed, moved


def _missing_note(
    section: Section, kernel: str, published: dict[CellKey, float], ours: dict[CellKey, float], ran: bool
) -> str:
    """Why the published figures that stand alone have nothing of ours beside them
    (``ran``: the section has a series of this kernel)."""
    alone = sorted((key for key in published if key not in ours), key=lambda k: (k[0], edge_order(k[1])))
    if not alone:
        return ""
    if not ran:
        return "— (published): gemmlab has no kernel for this one, so the document's figures stand alone."
    if not ours:
        return "— (published): none of our rows of this kernel carries this figure, so the document's stand alone."
    run = {size for size, _ in ours}
    points = []
    for size, edge in alone:
        where = f"N = {size_label(size)}" + ("" if edge is None else f", block edge {edge}")
        points.append(where + _left_out_reason(section, kernel, size, run))
    return f"— (published): the document measured {'; '.join(points)}, and we did not."


def _left_out_reason(section: Section, kernel: str, size: SizeKey, run: set[SizeKey]) -> str:
    """The experiment's reason for leaving a size out, where it gives one."""
    if size in run:
        return ""
    document = registry.find(section.experiment)
    for series in document.series if document else ():
        if kernel in series.kernels and series.max_size is not None and max(size) > series.max_size:
            return f" ({series.max_size_reason})" if series.max_size_reason else ""
    return " (a size this experiment does not run)"


def metric_tables(section: Section) -> list[MetricTable]:
    """Every table of a section: per kernel, per metric with a value (ours or published).

    Series that differ only in host memory share their kernel figures, so
    those get one table (named without the host memory); only the end-to-end
    figures get a table per host memory.
    """
    published_only = dict(published_only_kernels(section))
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
            found, devices = published_cells(section, kernel, metric)
            if not ours and not found:
                continue
            published, unstated = place_published(found, ours, metric.higher_is_better)
            keys = set(published) | (set(series.cells) if series else set())
            tables.append(
                MetricTable(
                    label=label,
                    kernel=kernel,
                    metric=metric,
                    sizes=sorted({size for size, _ in keys}),
                    edges=sorted({edge for _, edge in keys}, key=edge_order),
                    ours=ours,
                    published=published,
                    marks=marks,
                    our_device=section.device_of(kernel),
                    published_devices=devices,
                    unstated=unstated,
                    missing_note=_missing_note(section, kernel, published, ours, series is not None),
                    integer=series.integer if series is not None else section.integer,
                    ran=series is not None,
                )
            )
    # Keep each label's tables together (kernel figures, then end to end).
    first = {t.label: i for i, t in reversed(list(enumerate(tables)))}
    return sorted(tables, key=lambda t: first[t.label])


@dataclass
class OccupancyBlock:
    title: str
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str, list[str]]] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class Compiles:
    """The compiles stored with a section's results, and the runs those
    results came from (the compiles of those runs are the ones measured)."""

    stored: list[dict]
    runs: frozenset[int] = frozenset()

    def of(self, kernel: str, dtype: str, arch: str, edges: list[int]) -> dict[int, dict] | None:
        """Each edge's compile of ``kernel`` for ``arch`` (the catalogue's
        configuration), the newest of the section's runs, else the newest
        stored; None unless every edge has one."""
        config = config_text(catalogue.get(kernel).config)
        found: dict[int, dict] = {}
        for row in self.stored:
            if (row["kernel"], row["dtype"], row["config"], row["arch"]) != (kernel, dtype, config, arch):
                continue
            edge, earlier = row["block_edge"], found.get(row["block_edge"])
            if earlier is None or (row["run_id"] in self.runs) >= (earlier["run_id"] in self.runs):
                found[edge] = row
        return found if all(edge in found for edge in edges) else None


def _local_nvrtc() -> str:
    try:
        from gemmlab.backends.nvrtc import nvrtc_version

        return nvrtc_version()
    except ImportError:
        return "(NVRTC not installed)"


def _columns(
    kernel: str, cc: str, edges: list[int] | None, dtype: str, compiles: Compiles
) -> tuple[list[tuple[str, OccupancyResult]], str]:  # fmt: skip
    """The occupancy columns of ``kernel`` under the rules of ``cc``, and
    words naming the compile they come from: the one stored with the results
    where the database holds it, else one made now (and said so)."""
    from gemmlab.backends.nvrtc import normalise_arch
    from gemmlab.measure.kernel_occupancy import compile_arch_for, kernel_occupancy, occupancy_edges, occupancy_of

    spec = catalogue.get(kernel)
    arch = normalise_arch(spec.compile_arch(compile_arch_for(cc)))
    stored = compiles.of(kernel, dtype, arch, occupancy_edges(spec, edges))
    if stored is not None:
        resources = {edge: (row["registers"], row["smem_bytes"]) for edge, row in stored.items()}
        versions = sorted({str(row["nvrtc_version"] or "of unrecorded version") for row in stored.values()})
        runs = sorted({row["run_id"] for row in stored.values()})
        where = f"run{'s' * (len(runs) > 1)} {', '.join(map(str, runs))}"
        source = f"gemmlab's {arch} compile as measured (NVRTC {', '.join(versions)}, stored with {where})"
        return occupancy_of(spec, cc, resources, dtype=dtype), source
    columns = kernel_occupancy(kernel, compile_arch_for(cc), edges, dtype=dtype, cc=cc)
    source = (
        f"gemmlab's {arch} compile made now by NVRTC {_local_nvrtc()}, not necessarily the one measured: no compile "
        f"of these blocks is stored with the results (a database from before results schema v{COMPILES_FROM} holds "
        "none)"
    )
    return columns, source


def _occupancy_for(
    kernel: str, cc: str, edges: list[int] | None, label: str, dtype: str, compiles: Compiles,
    document: str | None = None, measured: frozenset[int] = frozenset(),
) -> OccupancyBlock:  # fmt: skip
    """The occupancy table of ``kernel`` under the rules of ``cc``. For a
    document's GPU (``document`` names it) ``measured`` holds the block edges the
    document ran: a column whose block our compile's registers cannot fit there
    is worked with the largest register count that fits, a bound the document's
    own run proves, and marked so."""
    from gemmlab.core.arch import parse_cc
    from gemmlab.measure.occupancy import largest_fitting_registers, occupancy_table, theoretical_occupancy

    block = OccupancyBlock(label)
    try:
        major, minor = parse_cc(cc)
        columns, source = _columns(kernel, f"{major}.{minor}", edges, dtype, compiles)
    except (GemmlabError, ImportError) as exc:
        # ImportError: the CUDA Python packages that hold NVRTC are missing.
        block.note = f"No occupancy table: {exc}"
        return block
    notes = [f"Threads per block from the kernel's geometry; registers and shared memory from {source}"]
    if document is None:
        notes[0] += "."
    else:
        notes[0] += (
            f"; NVRTC no longer targets {major}.{minor}, so that compile is worked under the rules of "
            f"{major}.{minor}. It is not {document}'s own compile, whose register counts gemmlab's reference data "
            "does not hold."
        )
    bounded = []
    for i, (name, result) in enumerate(columns):
        edge = edges[i] if edges and len(edges) == len(columns) else None
        if document is None or edge not in measured or result.limits["registers"] > 0:
            continue
        fitting = largest_fitting_registers(result.cc, result.threads_per_block)
        if fitting:
            bound = theoretical_occupancy(result.cc, result.threads_per_block, fitting, result.smem_requested)
            columns[i] = (f"{name} †", bound)
            bounded.append(f"{name}: ours {result.regs_per_thread}, at most {fitting}")
    if bounded:
        notes.append(
            f"† Our compile's registers per thread leave no room for one such block on {major}.{minor}, yet "
            f"{document} ran it, so its compile used fewer ({'; '.join(bounded)}): the column is worked with that "
            "bound, and its occupancy is the least the document's kernel had."
        )
    block.columns = [name for name, _ in columns] + ["device limit"]
    block.rows = occupancy_table(columns)
    block.note = " ".join(notes)
    return block


def occupancy_blocks(section: Section, stored: list[dict] | None = None) -> list[OccupancyBlock]:
    """Per catalogue kernel of the section: its theoretical occupancy on our GPU
    (and on the document's, where the layout names it), from the compiles
    ``stored`` with the results (:meth:`gemmlab.store.store.Store.compiles`);
    a kernel with none stored is compiled now, and its note says so."""
    cc = section.cc
    blocks = []
    published = section.published_rows()
    compiles = Compiles(stored or [], frozenset(r["run_id"] for r in section.rows if r.get("run_id") is not None))
    for kernel in dict.fromkeys(s.kernel for s in section.series):
        if kernel not in catalogue.kernel_ids():
            continue  # CPU baselines and kernels from outside the catalogue
        edges = sorted({e for s in section.series if s.kernel == kernel for e in s.edges() if e is not None})
        dtype = next(row["dtype"] for s in section.series if s.kernel == kernel for row in s.cells.values())
        if cc:
            title = f"{kernel} on {section.gpu_name} (compute capability {cc})"
            blocks.append(_occupancy_for(kernel, cc, edges or None, title, dtype, compiles))
        if section.layout.document_cc:
            doc = section.layout.document_cc
            device = next((r.device for r in published), "the document's GPU")
            measured = frozenset(r.block for r in published if r.kernel_id == kernel and r.block is not None)
            title = f"{kernel} on the document's GPU, {device} (compute capability {doc})"
            blocks.append(_occupancy_for(kernel, doc, edges or None, title, dtype, compiles, "the document", measured))
        if not cc and not section.layout.document_cc:
            blocks.append(OccupancyBlock(kernel, note="No occupancy table: the rows carry no compute capability."))
    return blocks


def summary(section: Section) -> str:
    """The section in one line: its devices, when, how many results, and the document's devices."""
    devices = section.published.devices() if section.published else []
    pub = f"; published figures: {'; '.join(devices)}" if devices else ""
    return f"{section.devices(cc=True)}, measured {section.dates}; {len(section.rows)} results{pub}"


def unrecorded_note(rows: list[Row]) -> str:
    """Said once, for the whole report: how many results predate the record of
    their configuration and backend ('' for none)."""
    old = sum(predates_config(r) for r in rows)
    if not old:
        return ""
    which = f"All {old} results" if old == len(rows) else f"{old} of the {len(rows)} results"
    return (
        f"{which} were stored before results schema v{CONFIG_RECORDED_FROM}, which records no configuration or "
        "backend: they stand for the catalogue's default configuration."
    )


def shown_and_folded(tables: list[MetricTable]) -> tuple[list[MetricTable], list[MetricTable]]:
    """The tables to draw, and those folded into one line (:func:`folded_text`)."""
    return [t for t in tables if not t.unmeasured], [t for t in tables if t.unmeasured]


def folded_text(section: Section, folded: list[MetricTable]) -> str:
    """One sentence for the tables with none of our figures: which metrics are
    missing for which kernels, and what measures them ('' for none)."""
    if not folded:
        return ""
    by_metric: dict[str, list[str]] = {}
    for t in folded:
        by_metric.setdefault(t.shown.short, []).append(t.label)
    missing = "; ".join(f"{short} of {', '.join(labels)}" for short, labels in by_metric.items())
    if all(t.metric.profiled for t in folded):
        document = registry.find(section.experiment) is not None
        command = f"gemmlab reproduce {section.experiment}" if document else "gemmlab sweep"
        how = f"Nsight Compute measures them: add --profile (`{command} --profile`)."
    else:
        how = "These results do not hold them."
    return f"Not measured here: {missing}. {how}"


def markdown(section: Section, tables: list[MetricTable], note: str = "") -> str:
    """A section's tables as one Markdown file; ``note``: the report's once-said note, as a footnote."""
    shown, folded = shown_and_folded(tables)
    lines = [
        f"# {section.experiment} on {section.devices()}",
        "",
        section.layout.title,
        "",
        summary(section),
        "",
        "Cells: ours (published). ⚠n marks a warning, listed at the end.",
        "",
    ]
    if folded:
        alone = ", ".join(f"{t.file_stem}.csv" for t in folded if t.published)
        lines += [folded_text(section, folded) + (f" The document's figures alone: {alone}." if alone else ""), ""]
    label = None
    for t in shown:
        if t.label != label:
            label = t.label
            lines += [f"## {label}", ""]
        lines += [t.to_markdown(), ""]
    if section.notes.texts:
        lines += ["## Warnings", ""] + [f"{i}. {text}" for i, text in enumerate(section.notes.texts, 1)] + [""]
    if note:
        lines += ["---", "", note, ""]
    return "\n".join(lines)


def warnings_csv(section: Section) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["mark", "kernel", "size", "block_edge", "warning"])
    for s in section.series:
        for (size, edge), row in sorted(s.cells.items(), key=lambda kv: (kv[0][0], edge_order(kv[0][1]))):
            for text in row["warnings"]:
                writer.writerow([section.notes.mark(text), s.label, size_label(size), edge_label(edge), text])
    return buf.getvalue()
