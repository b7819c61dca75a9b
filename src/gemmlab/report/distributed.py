"""The report's section for `gemmlab distributed`: one table per device of
every algorithm, GPU count, scaling and size, with the communication, GEMM
and overlap figures that the generic sections have no column for.

The store keeps a launch's rows as results of the experiment ``distributed``
without a schema of their own (:func:`gemmlab.studies.distributed.launch.store_row`):
the algorithm is the kernel, the GPU count and scaling the configuration (and
the variant), ``gflops`` is per GPU, and the communication and GEMM times, the
overlap and the local GEMM are told in the row's first warning. This module
reads them back from there; the scaling efficiency is worked again from the
one-GPU row of the same algorithm and size, as the command worked it.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.report.model import UNKNOWN_GPU, Row, ran_on_host, time_span
from gemmlab.report.tables import fmt
from gemmlab.store.records import Config
from gemmlab.studies.distributed import plan
from gemmlab.studies.distributed.launch import EXPERIMENT

ANCHOR = "distributed"
TITLE = "Distributed GEMM"
# The note store_row writes first in a row's warnings.
_NOTE = re.compile(
    r"distributed: (?P<gpus>\d+) GPUs, comm alone (?P<comm>[\d.]+) ms, GEMM alone (?P<gemm>[\d.]+) ms, "
    r"overlap efficiency (?P<overlap>-?\d+%|n/a).*?local GEMM (?P<local>.+)$"
)
COLUMNS = ("algorithm", "GPUs", "scaling", "M x N x K", "time [ms]", "TFLOP/s per GPU", "comm alone [ms]",
           "GEMM alone [ms]", "overlap", "scaling efficiency", "relative error", "local GEMM")  # fmt: skip


@dataclass
class Point:
    """One stored distributed result, with what its warning told."""

    algorithm: str
    gpus: int
    scaling: str
    grid: str
    m: int
    n: int
    k: int
    median_ms: float | None
    tflops_per_gpu: float | None
    comm_ms: float | None
    gemm_ms: float | None
    overlap: float | None
    local_gemm: str
    error: float | None
    verified: bool | None
    device: str
    date: str | None
    notes: list[str] = field(default_factory=list)  # the other warnings: a fallback, a wrong result
    scaling_efficiency: float | None = None

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


def is_distributed(row: Row) -> bool:
    return row.get("experiment") == EXPERIMENT


def _config(row: Row) -> dict:
    text = row.get("config")
    try:
        config = Config(text).values if isinstance(text, str) and text else dict(text or {})
    except ValueError:
        config = {}
    if "gpus" not in config or "scaling" not in config:
        # The variant says it too: "<P>gpu-<scaling>".
        gpus, _, scaling = str(row.get("variant") or "").partition("gpu-")
        config.setdefault("gpus", int(gpus) if gpus.isdigit() else None)
        config.setdefault("scaling", scaling or None)
    return config


def _number(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def point_of(row: Row) -> Point:
    config = _config(row)
    notes = [str(w) for w in row.get("warnings") or []]
    told = next((m for w in notes if (m := _NOTE.match(w))), None)
    comm = gemm = overlap = None
    local = "not recorded"
    if told is not None:
        notes.remove(told.string)
        comm, gemm, local = float(told["comm"]), float(told["gemm"]), told["local"].strip()
        overlap = None if told["overlap"] == "n/a" else float(told["overlap"].rstrip("%")) / 100
    error, tolerance = _number(row.get("error")), _number(row.get("tolerance"))
    gflops = _number(row.get("gflops"))
    if ran_on_host(row):
        device = str(row.get("cpu") or "a CPU not recorded") + " (gloo: the times mean nothing)"
    else:
        gpu = row.get("gpu_name")
        device = str(gpu) if gpu and gpu != UNKNOWN_GPU else "a GPU not recorded"
    return Point(
        algorithm=str(row["kernel"]), gpus=int(config.get("gpus") or 0), scaling=str(config.get("scaling") or "-"),
        grid=str(config.get("grid") or ""), m=int(row["m"]), n=int(row["n"]), k=int(row["k"]),
        median_ms=_number(row.get("median_ms")), tflops_per_gpu=None if gflops is None else gflops / 1e3,
        comm_ms=comm, gemm_ms=gemm, overlap=overlap, local_gemm=local, error=error,
        verified=None if error is None or tolerance is None else error <= tolerance, device=device,
        date=row.get("date"), notes=notes,
    )  # fmt: skip


def points(rows: Sequence[Row]) -> list[Point]:
    """The distributed rows as points, a later run of the same point replacing an
    earlier one, in ladder order; each with its scaling efficiency against the
    one-GPU point of the same algorithm and size (strong: t1 / (P tP); weak: t1 / tP)."""
    found: dict[tuple, Point] = {}
    for row in rows:
        if is_distributed(row):
            p = point_of(row)
            found[(p.device, p.algorithm, p.gpus, p.scaling, p.grid, p.m, p.n, p.k)] = p
    # Weak scaling keeps N = K = size and M = size x P; strong keeps all three at size,
    # so the one-GPU point of either is the square of side N.
    one = {(p.device, p.algorithm, p.n): p.median_ms for p in found.values() if p.gpus == 1 and p.m == p.n == p.k}
    for p in found.values():
        base = one.get((p.device, p.algorithm, p.n))
        if base and p.median_ms and p.gpus:
            p.scaling_efficiency = plan.scaling_efficiency(p.scaling, base, p.median_ms, p.gpus)
    order = {name: i for i, name in enumerate(plan.ALGORITHMS + plan.BASELINES)}
    key = lambda p: (p.device, order.get(p.algorithm, len(order)), p.algorithm, p.scaling, p.n, p.gpus)
    return sorted(found.values(), key=key)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _error(p: Point) -> str:
    if p.error is None:
        return "-"
    return f"{p.error:.2e}" + (" WRONG" if p.verified is False else "")


def cells(p: Point) -> list[str]:
    """A point's row of the table, as text (COLUMNS)."""
    return [
        p.algorithm + (f" {p.grid}" if p.grid else ""), str(p.gpus), p.scaling, p.shape, _ms(p.median_ms),
        "-" if p.tflops_per_gpu is None else fmt(p.tflops_per_gpu), _ms(p.comm_ms), _ms(p.gemm_ms), _share(p.overlap),
        _share(p.scaling_efficiency), _error(p), p.local_gemm,
    ]  # fmt: skip


def summary_line(found: Sequence[Point]) -> str:
    """The section in one line, for the contents and the summary."""
    devices = " and ".join(dict.fromkeys(p.device for p in found))
    counts = [str(g) for g in sorted({p.gpus for p in found})]
    gpus = counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} and {counts[-1]}"
    algorithms = len({p.algorithm for p in found})
    return (f"{devices}, measured {time_span(p.date for p in found)}; {len(found)} results of {algorithms} "
            f"algorithm{'s' * (algorithms != 1)} over {gpus} GPUs")  # fmt: skip


def to_csv(found: Sequence[Point]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["device", "algorithm", "grid", "gpus", "scaling", "m", "n", "k", "median_ms", "tflops_per_gpu",
                     "comm_ms", "gemm_ms", "overlap_efficiency", "scaling_efficiency", "error", "verified",
                     "local_gemm", "date"])  # fmt: skip
    number = lambda v: "" if v is None else f"{v:.7g}"
    for p in found:
        writer.writerow([p.device, p.algorithm, p.grid, p.gpus, p.scaling, p.m, p.n, p.k, number(p.median_ms),
                         number(p.tflops_per_gpu), number(p.comm_ms), number(p.gemm_ms), number(p.overlap),
                         number(p.scaling_efficiency), number(p.error), "" if p.verified is None else p.verified,
                         p.local_gemm, p.date or ""])  # fmt: skip
    return buf.getvalue()


def section_html(found: Sequence[Point], folder: str) -> str:
    """The section: per device, the table of every point, and the notes of the
    points that fell back or came back wrong."""
    esc = html.escape
    parts = [
        f"<section id='{ANCHOR}'><h2>{TITLE}</h2>",
        f"<p class='summary'>{esc(summary_line(found))}</p>",
        "<p>Per algorithm, GPU count, scaling and size (bf16 inputs, FP32 sums): the time of the slowest rank, "
        "the rate per GPU, communication and the local GEMM each timed alone, and the overlap, the share of the "
        "shorter of the two hidden behind the other (100%: all hidden; 0: one after the other). Scaling "
        "efficiency is against the same algorithm on one GPU: strong t1 / (P tP), weak t1 / tP. "
        f"As CSV: <a href='{esc(folder)}/distributed.csv'>{esc(folder)}/distributed.csv</a>.</p>",
    ]
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    for device in dict.fromkeys(p.device for p in found):
        mine = [p for p in found if p.device == device]
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells(p)) + "</tr>" for p in mine)
        parts.append(f"<table><caption>On {esc(device)}</caption><thead><tr>{head}</tr></thead>"
                     f"<tbody>{body}</tbody></table>")  # fmt: skip
    notes = [f"{p.algorithm}, {p.gpus} GPUs, {p.scaling}, {p.shape}: {note}" for p in found for note in p.notes]
    if notes:
        parts.append("<h3>Notes</h3><ul>" + "".join(f"<li class='warn'>{esc(n)}</li>" for n in notes) + "</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def write(found: Sequence[Point], root: Path) -> str:
    """The section's CSV in its folder under ``root``, and its HTML."""
    folder = root / ANCHOR
    folder.mkdir(exist_ok=True)
    (folder / "distributed.csv").write_text(to_csv(found), encoding="utf-8")
    return section_html(found, ANCHOR)
