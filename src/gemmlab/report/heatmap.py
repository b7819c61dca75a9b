"""The dispatcher's heatmap: per GPU and element type, the share of cuBLAS
its picks and each rung's best configuration reach at every tuned shape."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gemmlab.report.drawing import Plot, figure, save_figure
from gemmlab.store.records import Pick

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


def share_grids(rows: Sequence[dict], picks: Sequence[Pick], experiment: str = "dispatch") -> list[ShareGrid]:
    """One grid per (GPU, element type) with a pick or a result of ``experiment``:
    the dispatcher's row from its picks (cuBLAS's time over the pick's), each
    rung's from its best configuration's stored ratio to cuBLAS."""
    cells: dict[tuple[str, str], dict[str, dict[tuple[int, int, int], float]]] = {}
    for p in picks:
        if p.cublas_ms and p.median_ms:
            series = cells.setdefault((p.gpu_name, p.dtype), {}).setdefault(DISPATCHER, {})
            series[(p.m, p.n, p.k)] = 100.0 * p.cublas_ms / p.median_ms
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

    fig, axes = figure(width=max(6.0, 0.55 * len(grid.shapes) + 2.5), height=max(2.5, 0.45 * len(grid.series) + 1.8))
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
