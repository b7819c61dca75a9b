"""Stored rows -> report sections: one per experiment and GPU, each a list of
series (one kernel configuration: its rows by size and block edge), the
metrics read from a row, and the published figures that sit beside ours.

Pure: plain values in, plain values out; tested without a GPU or a database.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gemmlab.backends import on_host
from gemmlab.core.errors import GemmlabError, unknown_name
from gemmlab.kernels import catalogue
from gemmlab.measure.ncu.metrics import generic_figures
from gemmlab.studies import dispatch
from gemmlab.studies import experiments as registry
from gemmlab.studies.distributed import launch
from gemmlab.studies.experiments.base import Layout, plot
from gemmlab.studies.reference import Published, ReferenceRow

Row = dict[str, Any]
SizeKey = tuple[int, int, int]  # (m, n, k)
Edge = int | None  # None: the kernel takes no block edge
CellKey = tuple[SizeKey, Edge]

NO_EXPERIMENT = "(no experiment)"
# The section key of rows whose run recorded no GPU.
UNKNOWN_GPU = "unknown GPU"
# The report's names for what is stored apart from a document's experiments,
# each with the command that measures it.
STRESS = "stress"
MEASURED_BY = {
    STRESS: "gemmlab stress",
    launch.EXPERIMENT: "gemmlab distributed",
    dispatch.EXPERIMENT: "gemmlab dispatch tune",
}


def ran_on_host(row: Row) -> bool:
    """Whether a row was measured on the CPU: a CPU baseline, or a distributed run over gloo."""
    return on_host(row["kernel"]) or row.get("backend") == launch.BACKEND["cpu"]


def integer_dtype(dtype: str | None) -> bool:
    """Whether ``dtype`` is an integer type (int32, int8): its operations are not FLOPs."""
    return bool(dtype) and str(dtype).startswith("int")


def readable_time(stamp: Any) -> str:
    """A stored ISO timestamp as a reader wants it: '2026-11-29 06:41 UTC'
    (a stamp without a zone is taken as UTC, as gemmlab stores them); text that
    is no timestamp comes back as it is."""
    text = str(stamp)
    if text.endswith("Z"):  # Python 3.10's fromisoformat does not read the Z of UTC
        text = text[:-1] + "+00:00"
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return str(stamp)
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def time_span(stamps: Iterable[Any]) -> str:
    """One readable time, or the first and last of several; 'date not recorded' for none."""
    found = sorted({str(s) for s in stamps if s})
    if not found:
        return "date not recorded"
    first, last = readable_time(found[0]), readable_time(found[-1])
    return first if first == last else f"{first} to {last}"


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
    profiled: bool = False  # measured by Nsight Compute: `--profile` fills it

    def named(self, integer: bool) -> Metric:
        """The metric as printed for integer rows (``integer``): operations, not
        floating-point ones (GOPS, GOP/s); itself otherwise."""
        if not integer:
            return self
        ops = lambda text: text.replace("FLOPs", "operations").replace("FLOP", "OP")
        return dataclasses.replace(self, title=ops(self.title), short=ops(self.short), unit=ops(self.unit))


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


def _profiled(key: str) -> Callable[[Row], float | None]:
    """A figure of the profiler's registry, read from the row's stored profile_json."""
    return lambda row: _number((row.get("profile_json") or {}).get(key))


def profiled_metrics() -> tuple[Metric, ...]:
    """A metric for each figure of the profiler's registry (gemmlab.measure.ncu.metrics.PROFILED)
    that the report does not read from a column of its own (METRICS below)."""
    return tuple(
        Metric(f.key, f.label, f.label, f.unit or "count", _profiled(f.key), f.higher_is_better, profiled=True)
        for f in generic_figures()
    )


METRICS: tuple[Metric, ...] = (
    TIME,
    GFLOPS,
    BANDWIDTH,
    E2E_TIME,
    E2E_GFLOPS,
    Metric("gips", "GIPS (warp instructions executed per second)", "GIPS", "10^9/s", _column("gips"),
           profiled=True),
    Metric("cgma_measured", "CGMA, measured (FLOPs per global-memory request)", "CGMA, measured", "FLOP/request",
           _column("cgma_measured"), profiled=True),
    Metric("cgma_analytic", "CGMA, analytic (FLOPs per global access of a thread)", "CGMA, analytic", "FLOP/access",
           _column("cgma_analytic")),
    Metric("achieved_occupancy", "Achieved occupancy", "achieved occupancy", "fraction",
           _column("achieved_occupancy"), profiled=True),
    Metric("ratio_to_baseline", "Speed relative to the library (library time / kernel time)", "speed vs library",
           "ratio", _column("ratio_to_baseline")),
    *profiled_metrics(),
)  # fmt: skip

# A CPU baseline copies nothing, so its plain figure is its end-to-end one.
PLAIN_OF_E2E = {"e2e_time": "time", "e2e_gflops": "gflops"}

# Results of a plain sweep, or rows of a notebook's own, have no document.
SWEEP_LAYOUT = Layout("Results", (plot("vs_size"), plot("compare_largest")))


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


def edge_order(edge: Edge) -> int:
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
        return sorted({edge for _, edge in self.cells}, key=edge_order)

    def value(self, metric: Metric, size: SizeKey, edge: Edge) -> float | None:
        row = self.cells.get((size, edge))
        return None if row is None else metric.value(row)

    def has(self, metric: Metric) -> bool:
        return any(metric.value(row) is not None for row in self.cells.values())

    @property
    def integer(self) -> bool:
        """Whether every row is of an integer type (its rates are GOPS, not GFLOPS)."""
        return all(integer_dtype(row.get("dtype")) for row in self.cells.values())

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
        return time_span(r.get("date") for r in self.rows)

    @property
    def integer(self) -> bool:
        """Whether every row is of an integer type."""
        return all(integer_dtype(r.get("dtype")) for r in self.rows)

    @property
    def host_only(self) -> bool:
        """Whether every row ran on the host (the CPU baselines alone)."""
        return all(on_host(r["kernel"]) for r in self.rows)

    @property
    def cpu(self) -> str:
        """The CPU(s) the section's host rows ran on, as their runs recorded them."""
        return " and ".join(dict.fromkeys(str(r["cpu"]) for r in self.rows if on_host(r["kernel"]) and r.get("cpu")))

    @property
    def device(self) -> str:
        """What the section was measured on: its GPU; for CPU baselines measured
        where no GPU was recorded, the CPU."""
        if self.gpu_name != UNKNOWN_GPU:
            return self.gpu_name
        if self.host_only:
            return self.cpu or "a CPU not recorded"
        return "a GPU not recorded"

    def device_of(self, kernel: str) -> str:
        """What ``kernel``'s rows were measured on: the CPU for a CPU baseline, else the section's GPU."""
        if on_host(kernel):
            cpus = dict.fromkeys(str(r["cpu"]) for r in self.rows if r["kernel"] == kernel and r.get("cpu"))
            return " and ".join(cpus) or "a CPU not recorded"
        return self.device

    @property
    def mixed(self) -> bool:
        """Whether CPU baselines sit beside GPU kernels."""
        return not self.host_only and any(on_host(r["kernel"]) for r in self.rows)

    def devices(self, cc: bool = False) -> str:
        """Every device of the section: the GPU (with its compute capability for
        ``cc``), and the CPU where CPU baselines ran beside GPU kernels."""
        device = self.device + (f" (compute capability {self.cc})" if cc and self.cc and not self.host_only else "")
        return f"{device} and {self.cpu or 'a CPU not recorded'} (CPU baselines)" if self.mixed else device

    def headline(self) -> Metric:
        """GFLOPS (GOPS for integer rows), or GB/s where most rows are memory-bound."""
        count = lambda m: sum(m.value(r) is not None for r in self.rows)
        return BANDWIDTH if count(BANDWIDTH) > count(GFLOPS) else GFLOPS.named(self.integer)

    def kernel_series(self, kernel: str) -> Series | None:
        return next((s for s in self.series if s.kernel == kernel), None)


def _normalise(row: Row) -> Row:
    out = dict(row)
    out["warnings"] = [str(w) for w in out.get("warnings") or []]
    out["experiment"] = out.get("experiment") or NO_EXPERIMENT
    out["gpu_name"] = out.get("gpu_name") or UNKNOWN_GPU
    # Rows written by hand (a notebook) may give only n for a square product.
    for dim in ("m", "k"):
        if out.get(dim) is None:
            out[dim] = out.get("n")
    return out


def row_size(row: Row) -> SizeKey:
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
        size = row_size(r)
        edge = int(r["block_edge"]) if r.get("block_edge") else None
        # A later run of the same point replaces an earlier one.
        by_key[key].cells[(size, edge)] = r
    # CPU baselines first, then the catalogue's ladder, then anything else.
    ladder = {kernel: i for i, kernel in enumerate(catalogue.kernel_ids())}
    return sorted(by_key.values(), key=lambda s: (not on_host(s.kernel), ladder.get(s.kernel, len(ladder))))


def no_results() -> GemmlabError:
    return GemmlabError("There are no results to report.", "Run `gemmlab reproduce` or `gemmlab sweep` first.")


def check_requested(requested: Sequence[str], stored: Sequence[str]) -> None:
    """Refuse a requested experiment that is not ``stored``: an unknown name is
    called unknown, with the known ones and the closest; a known one not
    measured yet is named with the command that measures it."""
    known = list(dict.fromkeys([*registry.names(), *MEASURED_BY, *stored]))
    for name in requested:
        if name in stored:
            continue
        if name not in known:
            raise unknown_name("experiment", name, known, f"Known: {', '.join(known)}.", cutoff=0.4)
        command = MEASURED_BY.get(name, f"gemmlab reproduce {name}")
        listing = f"Stored: {', '.join(stored)}. " if stored else ""
        raise GemmlabError(f"No results of {name} are stored.", f"{listing}Run `{command}` to measure it.")


def build_sections(rows: Iterable[Row], experiments: Sequence[str] | None = None) -> list[Section]:
    """Group rows into sections (experiment x GPU), experiments in the spec's order."""
    rows = [_normalise(r) for r in rows]
    if not rows:
        raise no_results()
    present = list(dict.fromkeys(r["experiment"] for r in rows))
    if experiments:
        check_requested(experiments, present)
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


def published_metric(section: Section, kernel: str, metric: Metric) -> str | None:
    """The published metric (reference.METRICS) shown beside ``metric`` of ``kernel``."""
    mapping = section.layout.published_metrics
    if on_host(kernel):
        mapping = {PLAIN_OF_E2E.get(key, key): ref for key, ref in mapping.items()}
    return mapping.get(metric.key)


def published_cells(section: Section, kernel: str, metric: Metric) -> tuple[dict[CellKey, float], list[str]]:
    ref_metric = published_metric(section, kernel, metric)
    if ref_metric is None:
        return {}, []
    if section.published is None:
        return {}, []
    found = section.published.values(kernel, ref_metric)
    cells = {(size_of(section, n), block): value for (n, block), (value, _) in found.items()}
    devices = list(dict.fromkeys(device for _, device in found.values()))
    return cells, devices


def size_of(section: Section, n: int) -> SizeKey:
    """Our size key for a document's N: N x N x N, or our one N x N shape with
    another K (the Brno copies and transposes are N x N with K = 1)."""
    ours = {size for size in (row_size(r) for r in section.rows) if size[0] == size[1] == n}
    return ours.pop() if len(ours) == 1 else (n, n, n)


def published_only_kernels(section: Section) -> list[tuple[str, str]]:
    """(lookup name, label) of kernels the document measured and this section lacks."""
    ours = {s.kernel for s in section.series}
    seen: dict[str, str] = {}
    for r in section.published_rows():
        name = r.kernel_id or r.kernel
        if name not in ours:
            seen.setdefault(name, r.label)
    return list(seen.items())


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
        if on_host(s.kernel):
            continue
        for ((m, n, k), edge), row in s.cells.items():
            dram_bytes, achieved = _number(row.get("dram_bytes")), GFLOPS.value(row)
            if dram_bytes and achieved:
                points.setdefault((s.kernel_label, m, n, k, edge), {
                    "label": s.kernel_label, "arithmetic_intensity": 2 * m * n * k / dram_bytes, "gflops": achieved,
                    "m": m, "n": n, "k": k, "block_edge": edge,
                })  # fmt: skip
    return list(points.values())
