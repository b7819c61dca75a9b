"""The report's plots (PNG for the page, SVG beside each): each plot kind that
an experiment's layout can name (``PLOTS``), and the roofline every section
gets where its rows allow one. How they are drawn (axes, legends, figures
that fit their legends, dense plots split) is :mod:`gemmlab.report.drawing`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gemmlab.backends import on_host
from gemmlab.core.errors import UnknownName
from gemmlab.report.drawing import (
    DPI,
    OURS_LINE,
    PUBLISHED_LINE,
    Line,
    Plot,
    SizeScale,
    axis_label,
    diagonals,
    draw_lines,
    edge_axis,
    figure,
    in_parts,
    legend,
    log_scale,
    save_figure,
    shared_legend,
    short_number,
    value_axis,
    value_scale,
)
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
    size_of,
    size_text,
    slug,
)
from gemmlab.report.tables import place_published
from gemmlab.studies.experiments.base import PlotSpec
from gemmlab.studies.reference import METRIC_TITLES


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
        fig, axes = figure(len(panel_rows), 2, width=12.5, height=4.0 * len(panel_rows) + 0.5)
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
                value_axis(ax, metric, cells.values(), y_scales[c])
                ax.set_title(f"{metric.title}, {who}", fontsize="medium")
        shared_legend(fig, axes, "block edge", [f"b = {edge_label(e)}" for e in edges])
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
        fig, axes = figure(1, len(panels), width=5.5 * len(panels) + 1.5, height=4.5)
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
            edge_axis(ax, edges)
            value_axis(ax, metric, cells.values(), y_scale)
            ax.set_title(who, fontsize="medium")
        shared_legend(fig, axes, "matrix size", [size_text(size) for size in sizes])
        fig.suptitle(f"{s.label}: time against block edge")
        caption = f"{s.label}: time against block edge, a line per matrix size"
        plots.append(save_figure(fig, out, f"{slug(s.label)}_time_vs_edge", caption))
    return plots


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
            lines.append(Line(pts, {"marker": "o", "ls": OURS_LINE, "color": "C0", "label": f"ours, {section.device}"}))
    pub_slow, dev = _published_series(section, slow, TIME)
    pub_fast, _ = _published_series(section, fast, TIME)
    pts = [
        (size, pub_slow[(size, e)] / v)
        for (size, e), v in pub_fast.items()
        if e == edge and v and (size, e) in pub_slow
    ]
    if pts:
        lines.append(Line(pts, {"marker": "s", "ls": PUBLISHED_LINE, "color": "C1", "label": f"published, {dev}"}))
    if not lines:
        return []
    fig, axes = figure(width=7.5, height=4.5)
    ax = axes[0][0]
    draw_lines(ax, lines)
    ax.axhline(1.0, color="grey", ls=":", lw=1)
    ax.set_ylabel(f"speed-up: {slow} time / {fast} time [×]")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"Shared-memory speed-up at block edge {edge}")
    legend(ax)
    caption = f"Speed-up of {fast} over {slow} at block edge {edge} against size (above 1: shared memory wins)"
    return [save_figure(fig, out, f"speedup_{slug(fast)}_over_{slug(slow)}", caption)]


def _cpu_gpu_lines(section: Section) -> list[list[Line]]:
    """One group of lines per kernel: ours (a line per host memory) and the paper's."""
    groups: dict[str, list[Line]] = {}
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
        groups.setdefault(s.kernel, []).append(Line(pts, {**style, "label": f"{s.label} ({how})"}))
    # One dashed line per kernel, even where it has a series per host memory.
    subjects = {s.kernel: s.kernel for s in section.series} | dict(published_only_kernels(section))
    for kernel, label in subjects.items():
        _, pub, dev = _published_pick(section, kernel, (E2E_GFLOPS, GFLOPS))
        if not pub:
            continue
        top: dict[SizeKey, float] = {}
        for (size, _), v in pub.items():
            top[size] = max(v, top.get(size, v))
        colour = colours.setdefault(kernel, f"C{len(colours) % 10}")
        style = {"marker": "x", "ls": PUBLISHED_LINE, "color": colour, "label": f"published {label} ({dev})"}
        groups.setdefault(kernel, []).append(Line(list(top.items()), style))
    return list(groups.values())


def plot_cpu_gpu(section: Section, out: Path) -> list[Plot]:
    """GFLOPS against N for the CPU baselines and each GPU kernel (its best block
    edge), end to end where the copies were timed; the paper's figures dashed.
    More than ``MAX_SERIES`` lines become several figures on the same axes."""
    groups = _cpu_gpu_lines(section)
    parts = in_parts(groups)
    if not parts:
        return []
    every = [v for group in groups for line in group for _, v in line.points if v > 0]
    y_scale = value_scale(every)
    y_limits = (min(every) / 1.5, max(every) * 1.5) if y_scale == "log" else (0.0, max(every) * 1.08)
    caption = "GFLOPS against N: CPU baselines and GPU kernels, end to end (copies included) where timed"
    plots = []
    for i, lines in enumerate(parts, 1):
        fig, axes = figure(width=10.5, height=5.0)
        ax = axes[0][0]
        draw_lines(ax, lines)
        value_axis(ax, GFLOPS, every, y_scale)
        ax.set_ylim(*y_limits)  # the same axes in every part, to compare across them
        part = f" (part {i} of {len(parts)})" if len(parts) > 1 else ""
        fig.suptitle(f"CPU against GPU{part}: ours (solid) on {section.devices()}, published (dashed)")
        legend(ax, outside=True)
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
    fig, axes = figure(1, 2, width=13.0, height=5.0)
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
            ax.bar_label(bars, labels=[short_number(h) if h else "" for h in heights], fontsize="x-small", padding=2)
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
                log_scale(ax, "y", min(every), max(every))
                ax.set_ylim(min(every) / 1.5, max(every) * 2.0)  # room for the labels
            ax.set_ylabel(axis_label("bandwidth [GB/s] (bytes read + written / time)", y_scale))
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
    fig, axes = figure(width=max(7.0, 1.2 * len(picks) + 3.0), height=5.0)
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
    value_axis(ax, headline, values)
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
    fig, axes = figure(nrows, ncols, width=5.6 * ncols, height=5.4 * nrows + 0.6)
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
            log_scale(ax, "x", lo, hi)
            log_scale(ax, "y", lo, hi)
            diagonals(ax, lo, hi)
        else:
            lo, hi = 0.0, max(every) * 1.1
            ax.plot([lo, hi], [lo, hi], color="grey", lw=0.9)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        title, unit = METRIC_TITLES[ref]
        if any(m in (E2E_TIME, E2E_GFLOPS) for m in used):
            title += " (GPU: end to end)"
        ax.set_xlabel(f"{axis_label(f'published [{unit}]', scale)}\n{'; '.join(dict.fromkeys(devices))}")
        ax.set_ylabel(axis_label(f"ours [{unit}], {section.devices()}", scale))
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
