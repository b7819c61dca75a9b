"""The findings at the top of the report: what was measured with what, how
far each ladder gets against cuBLAS and the measured peak, how many times
faster today's runs are than each document's machines, and one chart per
ladder with a bar per rung.

Everything comes from the rows the report shows (their cells, so every
number here is in a table below) and the stored peak rows; nothing is
estimated. Where a figure is missing the text says so.
"""

from __future__ import annotations

import html
import itertools
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.backends import on_host
from gemmlab.core.dtypes import peak_type
from gemmlab.kernels import catalogue
from gemmlab.kernels.ladder import Ladder
from gemmlab.report.model import (
    BANDWIDTH,
    E2E_TIME,
    GFLOPS,
    METRICS,
    TIME,
    UNKNOWN_GPU,
    Edge,
    Metric,
    Row,
    Section,
    Series,
    SizeKey,
    integer_dtype,
    published_metric,
    ran_on_host,
    size_of,
    size_text,
    slug,
)
from gemmlab.store.rows import latest_peak_of

RATIO = next(m for m in METRICS if m.key == "ratio_to_baseline")

# What the versions line names, from the run columns every row carries.
VERSION_FIELDS = (
    ("driver_version", "CUDA driver"),
    ("runtime_version", "CUDA runtime"),
    ("nvrtc_version", "NVRTC"),
)


def _distinct(rows: Iterable[Row], key: str) -> list[str]:
    return list(dict.fromkeys(str(r[key]) for r in rows if r.get(key)))


def _named(rows: list[Row], key: str) -> str:
    """The distinct values of a run column, and how many rows lack it where only some do."""
    values = _distinct(rows, key)
    if not values:
        return "not recorded"
    lacking = sum(not r.get(key) for r in rows)
    return " and ".join(values) + (f" (not recorded for {lacking} of {len(rows)} results)" if lacking else "")


def versions_line(rows: list[Row]) -> str:
    """The devices and the software the rows were measured with, from their runs:
    the GPUs of the GPU rows with the CUDA versions, and the CPUs of the CPU
    baselines; no CUDA versions where no row ran on a GPU."""
    gpu_rows = [r for r in rows if not ran_on_host(r)]
    host_rows = [r for r in rows if ran_on_host(r)]
    recorded = [r for r in gpu_rows if r.get("gpu_name") and r["gpu_name"] != UNKNOWN_GPU]
    gpus = list(dict.fromkeys((r["gpu_name"], r.get("cc")) for r in recorded))
    gpu = " and ".join(f"{name} (compute capability {cc})" if cc else str(name) for name, cc in gpus)
    cpu = " and ".join(_distinct(host_rows, "cpu")) or "a CPU not recorded"
    parts = []
    if gpu_rows:
        cuda = ", ".join(f"{label} {_named(gpu_rows, key)}" for key, label in VERSION_FIELDS)
        parts.append(f"Measured on {gpu or 'a GPU not recorded'} with {cuda}")
        if host_rows:
            parts.append(f"the CPU results on {cpu}")
    else:
        parts.append(f"Measured on the CPU, {cpu}" if host_rows else "Measured on a device not recorded")
    revisions = _distinct(rows, "git_revision")
    git = f" (git {', '.join(revisions)})" if revisions else ""
    parts.append(f"gemmlab {_named(rows, 'gemmlab_version')}{git}")
    return "; ".join(parts) + "."


def holdings_line(sections: list[Section], others: list[str]) -> str:
    """What these results hold, in one sentence: each experiment's count of
    results, then ``others`` (the distributed and stress runs, in words)."""
    counts: dict[str, int] = {}
    for section in sections:
        counts[section.experiment] = counts.get(section.experiment, 0) + len(section.rows)
    parts = [f"{count} result{'s' * (count != 1)} of {experiment}" for experiment, count in counts.items()]
    parts += others
    return f"Reported here: {_joined(parts)}." if parts else ""


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def rate_unit(dtype: str) -> str:
    """GFLOP/s, or GOP/s for an integer type."""
    return "GOP/s" if integer_dtype(dtype) else "GFLOP/s"


# --- ladders ------------------------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    """A rung's best cell at one size: its speed relative to cuBLAS and its GFLOPS."""

    share: float  # cuBLAS time / kernel time
    gflops: float | None


@dataclass
class LadderResult:
    """One ladder's rows on one GPU in one element type."""

    ladder: Ladder
    gpu: str
    dtype: str
    # rung id -> size -> its best cell there (over block edges and series)
    rates: dict[str, dict[SizeKey, Rate]] = field(default_factory=dict)
    peak: Row | None = None  # the stored peak row of this GPU and element type

    @property
    def rungs(self) -> list[str]:
        """The measured rungs, in ladder order."""
        return [r.id for r in self.ladder.rungs if r.id in self.rates]

    @property
    def largest(self) -> SizeKey:
        return max({s for sizes in self.rates.values() for s in sizes}, key=_volume)

    def best(self) -> tuple[str, Rate]:
        """The rung with the highest share of cuBLAS at the largest size measured."""
        at = [(rung, self.rates[rung][self.largest]) for rung in self.rungs if self.largest in self.rates[rung]]
        return max(at, key=lambda item: item[1].share)

    def chart_size(self) -> SizeKey:
        """The largest size every measured rung has; where there is none, the
        size most rungs have (the largest of those)."""
        sizes = {s for sizes in self.rates.values() for s in sizes}
        return max(sizes, key=lambda s: (sum(s in self.rates[r] for r in self.rungs), _volume(s)))

    def bars(self) -> list[tuple[str, float | None]]:
        """(rung, share of cuBLAS at the chart's size, None where not measured there), in ladder order."""
        size = self.chart_size()
        return [(rung, rate.share if (rate := self.rates[rung].get(size)) else None) for rung in self.rungs]

    def biggest_step(self) -> tuple[str, str, float] | None:
        """The consecutive pair of charted rungs with the largest gain in share."""
        shown = [(rung, share) for rung, share in self.bars() if share is not None]
        steps = [(a, b, sb - sa) for (a, sa), (b, sb) in itertools.pairwise(shown)]
        return max(steps, key=lambda step: step[2], default=None)

    @property
    def title(self) -> str:
        return f"{self.ladder.name}, {self.dtype}, on {self.gpu}"

    @property
    def file_stem(self) -> str:
        return f"summary_{slug(self.ladder.name)}_{slug(self.dtype)}_{slug(self.gpu)}"


def _volume(size: SizeKey) -> tuple[int, SizeKey]:
    m, n, k = size
    return m * n * k, size


def ladder_results(sections: list[Section], peaks: list[Row]) -> list[LadderResult]:
    """Every (GPU, ladder, element type) that has rows with a ratio to cuBLAS."""
    ladder_of = {rung.id: ladder for ladder in catalogue.LADDERS for rung in ladder.rungs}
    found: dict[tuple[str, str, str], LadderResult] = {}
    for section in sections:
        for series in section.series:
            ladder = ladder_of.get(series.kernel)
            if ladder is None:
                continue
            for (size, _), row in series.cells.items():
                share = RATIO.value(row)
                if share is None:
                    continue
                dtype = str(row.get("dtype") or "float32")
                key = (section.gpu_name, ladder.name, dtype)
                result = found.setdefault(key, LadderResult(ladder, section.gpu_name, dtype))
                at = result.rates.setdefault(series.kernel, {})
                if size not in at or share > at[size].share:
                    at[size] = Rate(share, GFLOPS.value(row))
    for result in found.values():
        # A second C type of the same inputs (bfloat16-out, e4m3-bf16) runs at the inputs' peak.
        inputs = peak_type(result.dtype)
        mine = [p for p in peaks if p.get("gpu_name") == result.gpu and p.get("dtype") == inputs]
        result.peak = latest_peak_of(mine)
    order = {ladder.name: i for i, ladder in enumerate(catalogue.LADDERS)}
    return sorted(found.values(), key=lambda r: (r.gpu, order[r.ladder.name], r.dtype))


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def ladder_text(result: LadderResult) -> list[str]:
    """The ladder's sentences: its best rung against cuBLAS and the peak, and its biggest step."""
    rung, rate = result.best()
    size = size_text(result.largest)
    lines = [
        f"{result.title}: the best kernel at the largest size measured ({size}) is {rung}, "
        f"at {_percent(rate.share)} of cuBLAS's speed."
    ]
    peak = result.peak
    if peak is None:
        lines.append(f"No measured peak is stored for {result.dtype} on {result.gpu} (`gemmlab peak` measures it).")
    elif rate.gflops is None:
        rate_name = "GOPS" if integer_dtype(result.dtype) else "GFLOPS"
        lines.append(f"{rung} has no {rate_name} stored at {size}, so its share of the measured peak is not known.")
    else:
        unit = rate_unit(result.dtype)
        lines.append(
            f"That is {rate.gflops:,.0f} {unit}, {_percent(rate.gflops / peak['gflops'])} of the measured peak "
            f"of {peak['gflops']:,.0f} {unit} ({peak['family']}, {peak['instruction']})."
        )
    step = result.biggest_step()
    if step is not None:
        before, after, gain = step
        lines.append(
            f"The largest step at {size_text(result.chart_size())}: {before} to {after}, "
            f"+{gain * 100:.0f} points of cuBLAS's speed."
        )
    return lines


def draw_ladder_chart(result: LadderResult, out: Path) -> list[str]:
    """A horizontal bar per rung (top to bottom in ladder order), written as PNG and SVG; the file names."""
    from matplotlib.figure import Figure

    bars = result.bars()
    size = size_text(result.chart_size())
    fig = Figure(figsize=(7.5, 1.2 + 0.32 * len(bars)), layout="constrained")
    ax = fig.subplots()
    positions = list(range(len(bars)))[::-1]
    values = [share * 100 if share is not None else 0.0 for _, share in bars]
    ax.barh(positions, values, color="#4a78b5")
    for y, (_, share) in zip(positions, bars, strict=True):
        label = _percent(share) if share is not None else f"not measured at {size}"
        ax.text((share or 0) * 100 + 1, y, label, va="center", fontsize=8)
    ax.set_yticks(positions, [rung for rung, _ in bars], fontsize=8)
    ax.axvline(100, color="#888", linewidth=0.8, linestyle="--")
    ax.set_xlim(0, max(110.0, max(values) * 1.15))
    ax.set_xlabel("share of cuBLAS's speed at this size [%] (cuBLAS time / kernel time)")
    ax.set_title(f"{result.title}: each rung's share of cuBLAS at {size}", fontsize=10)
    names = [f"{result.file_stem}.png", f"{result.file_stem}.svg"]
    fig.savefig(out / names[0], dpi=100)
    # No date in the SVG, so that the same rows draw the same file.
    fig.savefig(out / names[1], metadata={"Date": None})
    return names


# --- documents ----------------------------------------------------------------------


@dataclass(frozen=True)
class SpeedUp:
    """How many times as fast our runs are as one machine of a document, over the cells both measured."""

    experiment: str
    ours: str  # the machine of our rows: the section's GPU, or our CPU for the CPU baselines
    device: str  # the document's machine
    compared_by: str
    ratios: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)


Pairs = dict[tuple[str, str, SizeKey, int | None], tuple[float, float, Metric]]


def _pairs(section: Section, metrics: tuple[Metric, ...], published: str) -> Pairs:
    """{(device, kernel, size, edge): (ours, published, our metric)} over every cell both measured.

    Where two of our series share a cell (pinned and pageable host memory),
    the slower is kept: the document's host memory is not known."""
    found: Pairs = {}
    doc = section.published
    if doc is None:
        return found
    for series in section.series:
        for metric in metrics:
            if published_metric(section, series.kernel, metric) != published:
                continue
            for device in doc.devices():
                for (n, block), (value, _) in doc.values(series.kernel, published, device).items():
                    size = size_of(section, n)
                    mine = _ours(series, metric, size, block)
                    if mine is None or not value:
                        continue
                    ours, edge = mine
                    key = (device, series.kernel, size, edge)
                    if key not in found or _slower(metric, ours, found[key][0]):
                        found[key] = (ours, value, metric)
    return found


def _ours(series: Series, metric: Metric, size: SizeKey, block: int | None) -> tuple[float, Edge] | None:
    """Our value for a document's cell, and the block edge it is at. A document
    that did not state its block (Brno's copies, Kursk's naive kernel) chose
    one, as its notes say, the best it tried; ours is then our best edge."""
    if block is None and None not in series.edges():
        return series.best(metric, size)
    value = series.value(metric, size, block)
    return None if value is None else (value, block)


def _slower(metric: Metric, value: float, than: float) -> bool:
    return value < than if metric.higher_is_better else value > than


def _compared_by(metric: Metric, host: bool) -> str:
    if host:
        return "the time of the call on the CPU" if metric in (TIME, E2E_TIME) else metric.short
    if metric is E2E_TIME:
        return "end-to-end time (copies to and from the GPU included)"
    return "kernel time" if metric is TIME else metric.short


def speedups(section: Section) -> list[SpeedUp]:
    """Per machine of the section's document: ours against its figures, by time
    where the document printed times, else by its headline rate (GFLOPS or GB/s)."""
    pairs = _pairs(section, (TIME, E2E_TIME), "time_ms")
    if not pairs:
        metric = section.headline()
        pairs = _pairs(section, (metric,), "gbs" if metric is BANDWIDTH else "gflops")
    by_device: dict[str, list[tuple[float, bool, Metric]]] = {}
    for (device, kernel, *_), (ours, pub, metric) in pairs.items():
        faster = ours / pub if metric.higher_is_better else pub / ours
        by_device.setdefault(device, []).append((faster, on_host(kernel), metric))
    found = []
    for device, cells in by_device.items():
        host = all(on_host for _, on_host, _ in cells)
        cpus = _distinct(section.rows, "cpu")
        machine = (cpus[0] if len(cpus) == 1 else "our CPU") if host else section.gpu_name
        compared = " and ".join(dict.fromkeys(_compared_by(m, host) for _, _, m in cells))
        found.append(SpeedUp(section.experiment, machine, device, compared, tuple(f for f, _, _ in cells)))
    return found


def _times(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.3g}x"


def speedup_text(found: SpeedUp) -> str:
    low, high = min(found.ratios), max(found.ratios)
    spread = f"; range {_times(low)} to {_times(high)}" if len(found.ratios) > 1 else ""
    cells = "cell" if len(found.ratios) == 1 else "cells"
    return (
        f"{found.experiment}: ours on {found.ours} against the document's figures on {found.device}: "
        f"{_times(found.median)} as fast, the median over {len(found.ratios)} {cells} both measured{spread}; "
        f"compared by {found.compared_by}."
    )


# --- the block on the page ----------------------------------------------------------


def summary_html(
    sections: list[Section], peaks: list[Row], out: Path, rows: list[Row] | None = None, others: Sequence[str] = (),
) -> str:  # fmt: skip
    """The summary block of ``index.html``; draws the ladder charts into ``out``.
    ``rows``: every row the versions line names (default: the sections');
    ``others``: what the results hold beside the sections, in words.

    It leads with what the results hold; what they lack (a ladder against
    cuBLAS) is said once, briefly, at its end."""
    esc = html.escape
    named = rows if rows is not None else [r for s in sections for r in s.rows]
    parts = ["<div id='findings'><h2>Summary</h2>"]
    if named:
        parts.append(f"<p>{esc(versions_line(named))}</p>")
    holdings = holdings_line(sections, list(others))
    if holdings:
        parts.append(f"<p>{esc(holdings)}</p>")
    ladders = ladder_results(sections, peaks)
    if ladders:
        parts.append("<h3>Ladders against cuBLAS</h3>")
    for result in ladders:
        parts.append(f"<p>{esc(' '.join(ladder_text(result)))}</p>")
        png, svg = draw_ladder_chart(result, out)
        caption = f"{result.title}: each rung's share of cuBLAS's speed at {size_text(result.chart_size())}"
        parts.append(
            f"<figure><a href='{esc(svg)}'><img src='{esc(png)}' alt='{esc(caption)}'></a>"
            f"<figcaption>{esc(caption)} (<a href='{esc(svg)}'>SVG</a>).</figcaption></figure>"
        )
    lines = [speedup_text(found) for s in sections for found in speedups(s)]
    if lines:
        parts.append("<h3>Today against the documents' machines</h3><ul>")
        parts += [f"<li>{esc(line)}</li>" for line in lines]
        parts.append("</ul>")
    if sections and not ladders:
        names = _joined([ladder.name for ladder in catalogue.LADDERS]).replace(" and ", " or ")
        parts.append(f"<p class='note'>No ladder against cuBLAS here ({esc(names)}): `gemmlab sweep` with a "
                     "ladder's kernels measures one.</p>")  # fmt: skip
    parts.append("</div>")
    return "\n".join(parts)
