"""How the report draws: figures that grow until their legends fit inside
(:func:`save_figure`, a PNG for the page and an SVG beside it), size and value
axes, legends, and lines split across figures where one would hold too many.

Where ours and the published figures share a figure they share the kind of
value axis too (:func:`value_scale`, decided once from every value shown), a
figure grows until its legends fit inside it (:func:`_fit`), and a plot with
more than ``MAX_SERIES`` lines is drawn as several figures (:func:`in_parts`).
What each plot shows is :mod:`gemmlab.report.plots`'s."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gemmlab.report.model import Metric, SizeKey, size_label

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


def short_number(value: float) -> str:
    """A bar label: three significant digits at most, never exponents."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2f}"


def figure(nrows: int = 1, ncols: int = 1, width: float | None = None, height: float | None = None) -> tuple:
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


def edge_axis(ax: Any, edges: Sequence[int]) -> None:
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


def value_axis(ax: Any, metric: Metric, values: Iterable[float], scale: str | None = None) -> None:
    """The y axis of ``metric``: ``scale`` (the figure's decision), else decided from ``values``."""
    values = [v for v in values if v and v > 0]
    scale = (scale or value_scale(values)) if values else "linear"
    if scale == "log":
        log_scale(ax, "y", min(values), max(values))
    ax.set_ylabel(axis_label(f"{metric.short} [{metric.unit}]", scale))
    ax.grid(True, which="major", alpha=0.3)


def axis_label(text: str, scale: str) -> str:
    return f"{text}, log scale" if scale == "log" else text


def log_scale(ax: Any, which: str, lo: float, hi: float) -> None:
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


def legend(ax: Any, title: str | None = None, outside: bool = False) -> None:
    if not ax.get_legend_handles_labels()[0]:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    if outside:
        ax.legend(title=title, fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    else:
        ax.legend(title=title, fontsize="small")


def shared_legend(fig: Any, axes: Any, title: str, order: Sequence[str]) -> None:
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


@dataclass
class Line:
    """A line against size, drawn once all lines of an axis are known."""

    points: list[tuple[SizeKey, float]]
    style: dict[str, Any]


def draw_lines(ax: Any, lines: list[Line]) -> SizeScale:
    scale = SizeScale.of(size for line in lines for size, _ in line.points)
    for line in lines:
        pts = sorted(line.points, key=lambda p: _x(p[0]))
        ax.plot([scale.x(size) for size, _ in pts], [v for _, v in pts], **line.style)
    scale.apply(ax)
    return scale


def in_parts(groups: Sequence[list[Line]], limit: int = MAX_SERIES) -> list[list[Line]]:
    """The lines of ``groups`` packed, in order, into figures of at most ``limit``
    lines, a group (one kernel's lines: ours and the document's) kept together
    where it fits in one figure."""
    parts: list[list[Line]] = [[]]
    for group in groups:
        for start in range(0, len(group), limit):
            chunk = group[start : start + limit]
            if len(parts[-1]) + len(chunk) > limit:
                parts.append([])
            parts[-1].extend(chunk)
    return [part for part in parts if part]


def diagonals(ax: Any, lo: float, hi: float) -> None:
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
