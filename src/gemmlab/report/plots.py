"""The report's plots (PNG for the page, SVG beside each): each plot kind that
an experiment's layout can name (``PLOTS``), and the roofline every section
gets where its rows allow one.

Where ours and the published figures share a figure they share the kind of
value axis too (:func:`value_scale`, decided once from every value shown), a
figure grows until its legends fit inside it (:func:`_fit`), and a plot with
more than ``MAX_SERIES`` lines is drawn as several figures (:func:`_parts`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gemmlab.backends import on_host
from gemmlab.core.errors import UnknownName
from gemmlab.report.model import (
    BANDWIDTH,
    E2E_GFLOPS,
    E2E_TIME,
    GFLOPS,
    METRICS,
    TIME,
    CellKey,
    Edge,
    Metric,
    Section,
    Series,
    SizeKey,
    edge_label,
    edge_order,
    published_cells,
    published_metric,
    published_only_kernels,
    roofline_ceilings,
    roofline_points,
    size_label,
    size_of,
    size_text,
    slug,
)
from gemmlab.report.tables import place_published
from gemmlab.studies.experiments.base import PlotSpec
from gemmlab.studies.reference import METRIC_TITLES

DPI = 100

# Beyond 1.5 decades between the smallest and the largest value a linear axis
# squeezes the small ones onto its floor, so the axis turns logarithmic.
LOG_SPAN = 10**1.5

# More lines than this and neither the colours nor the legend can be told apart.
MAX_SERIES = 8

# Line styles where ours and a document's figures share axes, as the titles say.
OURS_LINE = "-"
PUBLISHED_LINE = "--"


@dataclass(frozen=True)
class Plot:
    file: str  # relative to the section's directory
    caption: str


def _short(value: float) -> str:
    """A bar label: three significant digits at most, never exponents."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2f}"


def _figure(nrows: int = 1, ncols: int = 1, width: float | None = None, height: float | None = None) -> tuple:
    # A bare Figure renders PNGs with Agg and leaves pyplot's backend alone
    # (a notebook keeps its own), and needs no display.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width or 6.0 * ncols, height or 4.2 * nrows), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _fit(fig: Any) -> None:
    """Grow ``fig`` until everything drawn, its legends above all, lies inside it:
    constrained layout makes room beside the axes for a legend outside them but
    lets a legend taller than the figure run off its top and bottom."""
    for _ in range(3):
        fig.draw_without_rendering()
        drawn = fig.get_tightbbox(fig._get_renderer())
        width, height = fig.get_size_inches()
        over_x = max(0.0, -drawn.x0) + max(0.0, drawn.x1 - width)
        over_y = max(0.0, -drawn.y0) + max(0.0, drawn.y1 - height)
        if over_x < 0.01 and over_y < 0.01:
            return
        fig.set_size_inches(width + over_x + 0.2, height + over_y + 0.2)


def save_figure(fig: Any, out: Path, stem: str, caption: str) -> Plot:
    """``stem``.png for the page and ``stem``.svg beside it, a vector copy to zoom into."""
    _fit(fig)
    for suffix in (".png", ".svg"):
        fig.savefig(out / f"{stem}{suffix}", dpi=DPI, bbox_inches="tight", pad_inches=0.1)
    return Plot(f"{stem}.png", caption)


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


def value_scale(values: Iterable[float]) -> str:
    """ "log" where the positive ``values`` span more than ``LOG_SPAN``, else
    "linear". A figure that shows ours beside the published figures decides
    once, from both, so that its panels are read the same way."""
    positive = [v for v in values if v and v > 0]
    return "log" if positive and max(positive) / min(positive) > LOG_SPAN else "linear"


def _value_axis(ax: Any, metric: Metric, values: Iterable[float], scale: str | None = None) -> None:
    """The y axis of ``metric``: ``scale`` (the figure's decision), else decided from ``values``."""
    values = [v for v in values if v and v > 0]
    scale = (scale or value_scale(values)) if values else "linear"
    if scale == "log":
        _log_scale(ax, "y", min(values), max(values))
    ax.set_ylabel(_axis_label(f"{metric.short} [{metric.unit}]", scale))
    ax.grid(True, which="major", alpha=0.3)


def _axis_label(text: str, scale: str) -> str:
    return f"{text}, log scale" if scale == "log" else text


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
    cells, devices = published_cells(section, kernel, metric)
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
    plots = []
    for s in section.series:
        headline = section.headline().named(s.integer)
        metrics = (TIME, headline)
        published = [_published_series(section, s.kernel, m) for m in metrics]
        panel_rows = [(f"ours, {section.device_of(s.kernel)}", [_cells_of(s, m) for m in metrics])]
        if any(cells for cells, _ in published):
            devices = "; ".join(dict.fromkeys(dev for cells, dev in published if cells))
            panel_rows.append((f"published, {devices}", [cells for cells, _ in published]))
        edges = sorted({e for _, cells in panel_rows for c in cells for _, e in c}, key=edge_order)
        colour = {e: f"C{i % 10}" for i, e in enumerate(edges)}
        # Ours and the document's on the same axes: one size axis, and one value
        # axis per metric (a column), decided from both rows.
        scale = SizeScale.of({size for _, cells in panel_rows for c in cells for size, _ in c} or s.sizes())
        y_scales = [value_scale(v for _, cells in panel_rows for v in cells[c].values()) for c in range(len(metrics))]
        fig, axes = _figure(len(panel_rows), 2, width=12.5, height=4.0 * len(panel_rows) + 0.5)
        for r, (who, cells_per_metric) in enumerate(panel_rows):
            for c, (metric, cells) in enumerate(zip(metrics, cells_per_metric, strict=True)):
                ax = axes[r][c]
                for edge in sorted({e for _, e in cells}, key=edge_order):
                    pts = sorted((size, v) for (size, e), v in cells.items() if e == edge)
                    ax.plot(
                        [scale.x(size) for size, _ in pts],
                        [v for _, v in pts],
                        marker="o",
                        color=colour[edge],
                        label=f"b = {edge_label(edge)}",
                    )
                scale.apply(ax)
                _value_axis(ax, metric, cells.values(), y_scales[c])
                ax.set_title(f"{metric.title}, {who}", fontsize="medium")
        _shared_legend(fig, axes, "block edge", [f"b = {edge_label(e)}" for e in edges])
        fig.suptitle(f"{s.label}: time and {headline.title} against size")
        caption = f"{s.label}: kernel time and {headline.title} against matrix size, a line per block edge"
        if len(panel_rows) > 1:
            caption += " (bottom: the document's figures)"
        plots.append(save_figure(fig, out, f"{slug(s.label)}_vs_size", caption))
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
        panels = [(f"ours, {section.device_of(s.kernel)} ({how})", _cells_of(s, metric))]
        if pub:
            panels.append((f"published, {pub_dev}", pub))
        sizes = sorted({size for _, cells in panels for size, _ in cells})
        colour = {size: f"C{i % 10}" for i, size in enumerate(sizes)}
        y_scale = value_scale(v for _, cells in panels for v in cells.values())
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
            _value_axis(ax, metric, cells.values(), y_scale)
            ax.set_title(who, fontsize="medium")
        _shared_legend(fig, axes, "matrix size", [size_text(size) for size in sizes])
        fig.suptitle(f"{s.label}: time against block edge")
        caption = f"{s.label}: time against block edge, a line per matrix size"
        plots.append(save_figure(fig, out, f"{slug(s.label)}_time_vs_edge", caption))
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
            lines.append(
                _Line(pts, {"marker": "o", "ls": OURS_LINE, "color": "C0", "label": f"ours, {section.device}"})
            )
    pub_slow, dev = _published_series(section, slow, TIME)
    pub_fast, _ = _published_series(section, fast, TIME)
    pts = [
        (size, pub_slow[(size, e)] / v)
        for (size, e), v in pub_fast.items()
        if e == edge and v and (size, e) in pub_slow
    ]
    if pts:
        lines.append(_Line(pts, {"marker": "s", "ls": PUBLISHED_LINE, "color": "C1", "label": f"published, {dev}"}))
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
    return [save_figure(fig, out, f"speedup_{slug(fast)}_over_{slug(slow)}", caption)]


def _parts(groups: Sequence[list[_Line]], limit: int = MAX_SERIES) -> list[list[_Line]]:
    """The lines of ``groups`` packed, in order, into figures of at most ``limit``
    lines, a group (one kernel's lines: ours and the document's) kept together
    where it fits in one figure."""
    parts: list[list[_Line]] = [[]]
    for group in groups:
        for start in range(0, len(group), limit):
            chunk = group[start : start + limit]
            if len(parts[-1]) + len(chunk) > limit:
                parts.append([])
            parts[-1].extend(chunk)
    return [part for part in parts if part]


def _cpu_gpu_lines(section: Section) -> list[list[_Line]]:
    """One group of lines per kernel: ours (a line per host memory) and the paper's."""
    groups: dict[str, list[_Line]] = {}
    colours: dict[str, str] = {}
    for s in section.series:
        metric = E2E_GFLOPS if s.has(E2E_GFLOPS) else GFLOPS
        pts = [(size, best[0]) for size in s.sizes() if (best := s.best(metric, size))]
        if not pts:
            continue
        how = "CPU" if on_host(s.kernel) else ("end to end" if metric is E2E_GFLOPS else "kernel only")
        if len(s.edges()) > 1:
            how += ", best block edge"
        # Ours are solid, as the title says; a kernel's second series (pageable
        # host memory, say) keeps its colour and line, with hollow square markers.
        again = s.kernel in groups
        colour = colours.setdefault(s.kernel, f"C{len(colours) % 10}")
        style = {"marker": "s" if again else "o", "ls": OURS_LINE, "color": colour}
        if again:
            style["markerfacecolor"] = "none"
        groups.setdefault(s.kernel, []).append(_Line(pts, {**style, "label": f"{s.label} ({how})"}))
    # One dashed line per kernel, even where it has a series per host memory.
    subjects = {s.kernel: s.kernel for s in section.series} | dict(published_only_kernels(section))
    for kernel, label in subjects.items():
        _, pub, dev = _published_pick(section, kernel, (E2E_GFLOPS, GFLOPS))
        if not pub:
            continue
        best: dict[SizeKey, float] = {}
        for (size, _), v in pub.items():
            best[size] = max(v, best.get(size, v))
        colour = colours.setdefault(kernel, f"C{len(colours) % 10}")
        style = {"marker": "x", "ls": PUBLISHED_LINE, "color": colour, "label": f"published {label} ({dev})"}
        groups.setdefault(kernel, []).append(_Line(list(best.items()), style))
    return list(groups.values())


def plot_cpu_gpu(section: Section, out: Path) -> list[Plot]:
    """GFLOPS against N for the CPU baselines and each GPU kernel (its best block
    edge), end to end where the copies were timed; the paper's figures dashed.
    More than ``MAX_SERIES`` lines become several figures on the same axes."""
    groups = _cpu_gpu_lines(section)
    parts = _parts(groups)
    if not parts:
        return []
    every = [v for group in groups for line in group for _, v in line.points if v > 0]
    y_scale = value_scale(every)
    y_limits = (min(every) / 1.5, max(every) * 1.5) if y_scale == "log" else (0.0, max(every) * 1.08)
    caption = "GFLOPS against N: CPU baselines and GPU kernels, end to end (copies included) where timed"
    plots = []
    for i, lines in enumerate(parts, 1):
        fig, axes = _figure(width=10.5, height=5.0)
        ax = axes[0][0]
        _draw_lines(ax, lines)
        _value_axis(ax, GFLOPS, every, y_scale)
        ax.set_ylim(*y_limits)  # the same axes in every part, to compare across them
        part = f" (part {i} of {len(parts)})" if len(parts) > 1 else ""
        fig.suptitle(f"CPU against GPU{part}: ours (solid) on {section.devices()}, published (dashed)")
        _legend(ax, outside=True)
        stem = f"cpu_vs_gpu-{i}" if len(parts) > 1 else "cpu_vs_gpu"
        plots.append(save_figure(fig, out, stem, caption + part))
    return plots


def _bandwidth_size(section: Section) -> SizeKey | None:
    """The document's size (4000) if we measured it, else our largest."""
    sizes = {size for s in section.series for size in s.sizes() if s.has(BANDWIDTH)}
    if not sizes:
        return None
    doc = {size_of(section, r.n) for r in section.published_rows()}
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
            ((f"ours, {section.device}", ours, "C0"), (f"published, {dev}", pub, "C1"))
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
            y_scale = value_scale(every)
            if y_scale == "log":
                _log_scale(ax, "y", min(every), max(every))
                ax.set_ylim(min(every) / 1.5, max(every) * 2.0)  # room for the labels
            ax.set_ylabel(_axis_label("bandwidth [GB/s] (bytes read + written / time)", y_scale))
            ax.set_title("Absolute", fontsize="medium")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=2, fontsize="small")
    where = f"{size_text(size)}, best tile edge" if size else "no size measured"
    fig.suptitle(f"Transpose and copy bandwidth ({where})")
    caption = f"Bandwidth of copies and transposes, ours beside the document's ({where})"
    return [save_figure(fig, out, "bandwidth_bars", caption)]


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
    all_edges = sorted({e for s, size in picks.values() for e in s.edges()}, key=edge_order)
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
    ax.set_title(f"All kernels at {at}, {section.devices()}")
    shown = [e for e in all_edges if e in handles]
    ax.legend(
        [handles[e] for e in shown],
        [f"b = {e}" if e is not None else "no block edge" for e in shown],
        title="block edge",
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    return [save_figure(fig, out, "compare_largest", f"{headline.title} of every kernel at {at}, a bar per block edge")]


def plot_published_vs_ours(section: Section, out: Path) -> list[Plot]:
    """Ours against the document's, one point per (kernel, size, block edge) they
    share, on log axes with the diagonals where the ratio is 1, 10, 100, ...
    (linear axes and the one diagonal where the values span little)."""
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
            ours_cells = _cells_of(s, metric)
            # Where the document states no block edge, beside our best one (as in the tables).
            placed, _ = place_published(pub, ours_cells, metric.higher_is_better)
            for key, p in placed.items():
                ours = ours_cells.get(key)
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
        # Published along x, ours along y: one scale for both, so the diagonal is ratio 1.
        scale = value_scale(every)
        for label, pts in points.items():
            colour, marker = style[label]
            handles[label] = ax.scatter([p for p, _ in pts], [o for _, o in pts], marker=marker, color=colour)
        if scale == "log":
            lo, hi = min(every) / 2, max(every) * 2
            _log_scale(ax, "x", lo, hi)
            _log_scale(ax, "y", lo, hi)
            _diagonals(ax, lo, hi)
        else:
            lo, hi = 0.0, max(every) * 1.1
            ax.plot([lo, hi], [lo, hi], color="grey", lw=0.9)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        title, unit = METRIC_TITLES[ref]
        if any(m in (E2E_TIME, E2E_GFLOPS) for m in used):
            title += " (GPU: end to end)"
        ax.set_xlabel(f"{_axis_label(f'published [{unit}]', scale)}\n{'; '.join(dict.fromkeys(devices))}")
        ax.set_ylabel(_axis_label(f"ours [{unit}], {section.devices()}", scale))
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
    return [save_figure(fig, out, "published_vs_ours", caption)]


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
    title = f"{section.experiment}: roofline on {section.device}"
    for suffix in (".png", ".svg"):
        roofline_plot(points, peak, bandwidth, out / f"roofline{suffix}", title,
                      annotate=len(points) <= ROOFLINE_ANNOTATED, dpi=DPI)  # fmt: skip
    caption = (
        "Roofline: achieved GFLOPS against arithmetic intensity (2·M·N·K FLOPs per byte of DRAM traffic that "
        f"Nsight Compute counted, L2 flushed), a marker per kernel, under the ceilings measured on this GPU: "
        f"cuBLAS SGEMM {peak:,.0f} GFLOP/s and a device-to-device copy {bandwidth:,.0f} GB/s"
    )
    if any(r.get("dtype") == "int32" for r in section.rows):
        caption += "; int32 kernels count operations, against the float32 ceiling"
    return [Plot("roofline.png", caption)]


# The plot kinds an experiment's layout names (PlotSpec.kind), with the
# options each takes as keyword arguments.
PLOTS: dict[str, Callable[..., list[Plot]]] = {
    "vs_size": plot_vs_size,
    "time_vs_edge": plot_time_vs_edge,
    "speedup": plot_speedup,
    "cpu_gpu": plot_cpu_gpu,
    "bandwidth_bars": plot_bandwidth_bars,
    "compare_largest": plot_compare_largest,
    "published_vs_ours": plot_published_vs_ours,
}


def draw(spec: PlotSpec, section: Section, out: Path) -> list[Plot]:
    """The plots of one of a layout's plot specs."""
    try:
        fn = PLOTS[spec.kind]
    except KeyError:
        raise UnknownName(
            f"The layout of {section.experiment} names a plot kind '{spec.kind}' that the report does not draw.",
            f"Use one of {', '.join(PLOTS)}, or add the plot function to PLOTS in gemmlab/report/plots.py.",
        ) from None
    return fn(section, out, **dict(spec.options))


# -- the dispatcher's heatmap -----------------------------------------------------------------------------------------

DISPATCHER = "dispatcher"


@dataclass(frozen=True)
class ShareGrid:
    """% of cuBLAS on one GPU and element type: a row per series (the
    dispatcher's picks, then each rung), a column per shape; None where a
    series has no figure for a shape."""

    gpu_name: str
    dtype: str
    shapes: tuple[tuple[int, int, int], ...]
    series: tuple[str, ...]
    percent: tuple[tuple[float | None, ...], ...]


def share_grids(rows: Sequence[dict], picks: Sequence[dict], experiment: str = "dispatch") -> list[ShareGrid]:
    """One grid per (GPU, element type) with a pick or a result of ``experiment``:
    the dispatcher's row from its picks (cuBLAS's time over the pick's), each
    rung's from its best configuration's stored ratio to cuBLAS."""
    cells: dict[tuple[str, str], dict[str, dict[tuple[int, int, int], float]]] = {}
    for p in picks:
        if p.get("cublas_ms") and p.get("median_ms"):
            series = cells.setdefault((p["gpu_name"], p["dtype"]), {}).setdefault(DISPATCHER, {})
            series[(p["m"], p["n"], p["k"])] = 100.0 * p["cublas_ms"] / p["median_ms"]
    for r in rows:
        if r.get("experiment") != experiment or not r.get("ratio_to_baseline"):
            continue
        series = cells.setdefault((r["gpu_name"], r["dtype"]), {}).setdefault(r["kernel"], {})
        shape = (r["m"], r["n"], r["k"])
        series[shape] = max(series.get(shape, 0.0), 100.0 * r["ratio_to_baseline"])
    grids = []
    for (gpu_name, dtype), by_series in sorted(cells.items()):
        shapes = tuple(
            sorted({s for found in by_series.values() for s in found}, key=lambda s: (s[0] * s[1] * s[2], s))
        )
        names = tuple(sorted(by_series, key=lambda name: (name != DISPATCHER, name)))
        percent = tuple(tuple(by_series[name].get(s) for s in shapes) for name in names)
        grids.append(ShareGrid(gpu_name, dtype, shapes, names, percent))
    return grids


def plot_share_heatmap(grid: ShareGrid, out: Path) -> Plot:
    """The grid as a heatmap, each cell labelled with its %, centred on 100% (red below, blue above)."""
    from matplotlib.colors import TwoSlopeNorm

    fig, axes = _figure(width=max(6.0, 0.55 * len(grid.shapes) + 2.5), height=max(2.5, 0.45 * len(grid.series) + 1.8))
    ax = axes[0][0]
    values = [[math.nan if v is None else v for v in row] for row in grid.percent]
    finite = [v for row in values for v in row if not math.isnan(v)]
    norm = TwoSlopeNorm(vcenter=100.0, vmin=min(50.0, *finite), vmax=max(150.0, *finite))
    image = ax.imshow(values, cmap="RdBu", norm=norm, aspect="auto")
    ax.set_xticks(range(len(grid.shapes)), ["x".join(map(str, s)) for s in grid.shapes], rotation=60, ha="right")
    ax.set_yticks(range(len(grid.series)), grid.series)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=7)
    fig.colorbar(image, ax=ax, label="% of cuBLAS")
    ax.set_title(f"% of cuBLAS, {grid.dtype} on {grid.gpu_name}")
    stem = f"share_{grid.dtype}_{grid.gpu_name}".replace(" ", "_").replace("/", "_")
    caption = (f"{grid.dtype} on {grid.gpu_name}: the dispatcher's pick and each rung's best configuration, "
               "as cuBLAS's time over theirs (timed in alternation); blank: not measured.")  # fmt: skip
    return save_figure(fig, out, stem, caption)
