"""Roofline plots: achieved GFLOPS against arithmetic intensity (FLOPs per byte
of DRAM traffic) under the machine's two ceilings, peak arithmetic rate and
DRAM bandwidth (Williams, Waterman and Patterson, CACM 2009).

The ceilings are measured, not taken from a data sheet: cuBLAS SGEMM at
8192 x 8192 x 8192 for the arithmetic rate and a large device-to-device copy
for the bandwidth (:func:`measure_ceilings`, GPU needed). Plotting takes plain
values and needs no GPU.
"""

from __future__ import annotations

import math
from itertools import cycle
from pathlib import Path
from typing import Any

from gemmlab.core import timing

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")


def ridge_point(compute_gflops: float, bandwidth_gbs: float) -> float:
    """Arithmetic intensity [FLOP/byte] where the bandwidth roof meets the compute roof."""
    return compute_gflops / bandwidth_gbs


def attainable_gflops(intensity: float, compute_gflops: float, bandwidth_gbs: float) -> float:
    """The roofline: a kernel of this intensity can reach at most this rate."""
    return min(compute_gflops, bandwidth_gbs * intensity)


def point_coordinates(point: dict[str, Any]) -> tuple[str, float | None, float | None]:
    """(legend label, arithmetic intensity, GFLOPS) of one point.

    A point is a dict with ``label`` (or ``kernel``), and either
    ``arithmetic_intensity`` or ``flops`` (or ``flops_model``) with ``dram_bytes``
    (or ``dram_bytes_read`` + ``dram_bytes_written``), and either ``gflops`` or
    ``flops`` with ``time_ms``. :meth:`gemmlab.measure.ncu.metrics.ProfileResult.to_dict`
    gives such a dict.
    """
    label = str(point.get("label") or point.get("kernel") or "?")
    flops = point.get("flops", point.get("flops_model"))
    intensity = point.get("arithmetic_intensity")
    if intensity is None and flops is not None:
        dram = point.get("dram_bytes")
        if dram is None and "dram_bytes_read" in point:
            dram = point["dram_bytes_read"] + point.get("dram_bytes_written", 0)
        intensity = flops / dram if dram else None
    gflops = point.get("gflops")
    if gflops is None and flops is not None and point.get("time_ms"):
        gflops = timing.gflops(flops, point["time_ms"])
    return label, intensity, gflops


def _annotation(point: dict[str, Any]) -> str:
    parts = []
    if point.get("block_edge"):
        parts.append(f"b={point['block_edge']}")
    if point.get("m") and point.get("n") and point.get("k"):
        same = point["m"] == point["n"] == point["k"]
        parts.append(f"N={point['m']}" if same else f"{point['m']}x{point['n']}x{point['k']}")
    return " ".join(parts)


def roofline_plot(
    points: list[dict[str, Any]],
    compute_gflops: float,
    bandwidth_gbs: float,
    out_png: Path,
    title: str,
    *,
    annotate: bool = True,
    dpi: int = 150,
) -> Path:
    """Draw the two ceilings and one marker style per kernel (legend) into ``out_png``.

    Points without a positive intensity or rate (nothing to place on a log
    axis) are left out. ``annotate`` labels each point with its block edge and
    size. Uses matplotlib's object interface with the Agg canvas, so it never
    touches pyplot's global state or needs a display.
    """
    from matplotlib.figure import Figure

    placed = []
    for p in points:
        label, intensity, gflops = point_coordinates(p)
        if intensity and gflops and intensity > 0 and gflops > 0:
            placed.append((label, intensity, gflops, _annotation(p)))

    ridge = ridge_point(compute_gflops, bandwidth_gbs)
    xs = [x for _, x, _, _ in placed] + [ridge]
    lo = 10 ** math.floor(math.log10(min(xs) / 2))
    hi = 10 ** math.ceil(math.log10(max(xs) * 2))

    fig = Figure(figsize=(8, 5.5))
    ax = fig.subplots()
    ax.plot([lo, ridge], [bandwidth_gbs * lo, compute_gflops], color="black", lw=1.5)
    ax.plot([ridge, hi], [compute_gflops, compute_gflops], color="black", lw=1.5)
    ax.text(hi, compute_gflops, f"compute ceiling {compute_gflops:,.0f} GFLOP/s ", ha="right", va="bottom",
            fontsize=8)  # fmt: skip
    ax.text(lo, bandwidth_gbs * lo, f" DRAM ceiling {bandwidth_gbs:,.0f} GB/s", ha="left", va="bottom", fontsize=8)

    styles: dict[str, str] = {}
    markers = cycle(MARKERS)
    for label, intensity, gflops, note in placed:
        first = label not in styles
        if first:
            styles[label] = next(markers)
        ax.plot(intensity, gflops, linestyle="", marker=styles[label], markersize=7, label=label if first else None,
                color=f"C{list(styles).index(label) % 10}")  # fmt: skip
        if note and annotate:
            ax.annotate(note, (intensity, gflops), textcoords="offset points", xytext=(5, 4), fontsize=7)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    top = max([compute_gflops] + [g for _, _, g, _ in placed])
    bottom = min([bandwidth_gbs * lo] + [g for _, _, g, _ in placed])
    ax.set_ylim(bottom / 2, top * 2)
    ax.set_xlabel("arithmetic intensity [FLOP / byte of DRAM traffic], FLOPs = 2·M·N·K")
    ax.set_ylabel("achieved GFLOP/s (2·M·N·K / time)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if placed:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=dpi)
    return out_png


def measure_ceilings(
    device_index: int = 0, *, gemm_size: int = 8192, copy_bytes: int = 2**30, reps: int = 10
) -> tuple[float, float]:
    """(compute GFLOPS, bandwidth GB/s) measured on this GPU, medians of CUDA-event timings.

    Compute: cuBLAS SGEMM (CuPy matmul, float32, TF32 off as CuPy leaves it by
    default) at ``gemm_size`` cubed. Bandwidth: a device-to-device copy of
    ``copy_bytes``, counting bytes read plus bytes written (the project's GB/s).
    """
    from gemmlab.core import gpu

    cp = gpu.cupy()
    with cp.cuda.Device(device_index):
        stream = cp.cuda.get_current_stream()
        gemm_ms = _sgemm_ms(cp, stream, gemm_size, reps)
        free = cp.cuda.runtime.memGetInfo()[0]
        nbytes = min(copy_bytes, free // 4) // 256 * 256
        copy_ms = _copy_ms(cp, stream, nbytes, reps)
    return timing.gflops(2 * gemm_size**3, gemm_ms), timing.gbytes_per_s(2 * nbytes, copy_ms)


def _median_ms(cp: Any, stream: Any, fn: Any, reps: int) -> float:
    from gemmlab.measure.run import _time

    _time(cp, stream, fn, 2, None)  # warm-up: cuBLAS picks and loads its kernel
    return timing.Timing.of(_time(cp, stream, fn, reps, None)).median_ms


def _sgemm_ms(cp: Any, stream: Any, n: int, reps: int) -> float:
    a = cp.random.random((n, n), dtype=cp.float32)
    b = cp.random.random((n, n), dtype=cp.float32)
    c = cp.empty((n, n), dtype=cp.float32)
    return _median_ms(cp, stream, lambda: cp.matmul(a, b, out=c), reps)


def _copy_ms(cp: Any, stream: Any, nbytes: int, reps: int) -> float:
    src = cp.ones(nbytes, dtype=cp.uint8)
    dst = cp.empty_like(src)
    return _median_ms(cp, stream, lambda: dst.data.copy_from_device_async(src.data, nbytes, stream), reps)
