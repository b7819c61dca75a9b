"""One page per user's kernel in the report: its results by size, block edge
and configuration, its GFLOPS against the size beside cuBLAS and beside the
catalogue kernels measured in the same experiments (the ones the user chose
to compare it with), and the points of it that failed.

A user's kernel is a row's kernel that came from a declaration (its row
carries the declaration's path in ``source``); nothing here looks it up in the
catalogue, which knows it only in the process that read its declaration.
Pages are written as ``<slug>/index.html`` beside the report's ``index.html``,
with the table as CSV and the plot as PNG.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gemmlab.report.drawing import save_figure
from gemmlab.report.model import Row, integer_dtype, slug
from gemmlab.store.records import Config

# The page's folder names start with this, so that they never meet a section's.
PREFIX = "kernel-"
COLUMNS = ("size", "block edge", "configuration", "time (median) [ms]", "GFLOPS", "cuBLAS GFLOPS",
           "ratio to cuBLAS", "error", "timed by (kernel; cuBLAS)")  # fmt: skip
FAILURE_COLUMNS = ("size", "block edge", "configuration", "kind", "reason")


def columns(unit: str = "GFLOPS") -> tuple[str, ...]:
    """The results table's columns, its rates in ``unit`` (GOPS for an integer kernel)."""
    return tuple(c.replace("GFLOPS", unit) for c in COLUMNS)


@dataclass
class UserPage:
    """What one user's kernel's page shows."""

    kernel: str
    source: str
    rows: list[Row]
    others: list[Row]  # other kernels' rows of the same experiments
    failures: list[dict] = field(default_factory=list)

    @property
    def folder(self) -> str:
        return PREFIX + slug(self.kernel)

    @property
    def unit(self) -> str:
        """GOPS where every point is of an integer type (integer operations are not FLOPs), else GFLOPS."""
        dtypes = {str(r.get("dtype") or "") for r in self.rows}
        return "GOPS" if dtypes and all(integer_dtype(d) for d in dtypes) else "GFLOPS"


def is_user_row(row: Row) -> bool:
    """Whether a stored row is a user's kernel's: it names the declaration it came from."""
    return bool(row.get("source"))


def user_pages(rows: Sequence[Row], failures: Sequence[dict] = ()) -> list[UserPage]:
    """A page for every user's kernel among ``rows`` (and among ``failures``: a
    kernel whose every point failed still gets its page), in the order first seen."""
    pages: dict[str, UserPage] = {}
    for r in [*rows, *failures]:
        if is_user_row(r) and r["kernel"] not in pages:
            pages[r["kernel"]] = UserPage(r["kernel"], str(r["source"]), [], [])
    for kernel, page in pages.items():
        page.rows = [r for r in rows if r["kernel"] == kernel]
        experiments = {r.get("experiment") for r in page.rows}
        page.others = [r for r in rows if r["kernel"] != kernel and r.get("experiment") in experiments]
        page.failures = [f for f in failures if f["kernel"] == kernel]
    return list(pages.values())


def _size(row: Row) -> str:
    m, n, k = row["m"], row["n"], row["k"]
    return str(n) if m == n == k else f"{m}x{n}x{k}"


def _config(row: Row) -> str:
    config = values = row.get("config")
    if isinstance(config, str) and config:
        try:
            values = Config(config).values
        except ValueError:
            return config
    return " ".join(f"{name}={value}" for name, value in (values or {}).items()) or "-"


def _number(value: object, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table_rows(page: UserPage) -> list[tuple[str, ...]]:
    """The results table: one line per point, by size, edge and configuration."""
    ordered = sorted(page.rows, key=lambda r: (r["m"] * r["n"] * r["k"], r.get("block_edge") or 0, _config(r)))
    return [
        (
            _size(r),
            str(r.get("block_edge") or "-"),
            _config(r),
            _number(r.get("median_ms"), ".4f"),
            _number(r.get("gflops"), ",.1f"),
            _number(r.get("baseline_gflops"), ",.1f"),
            _number(r.get("ratio_to_baseline"), ".1%"),
            _number(r.get("error"), ".1e"),
            _methods(r),
        )
        for r in ordered
    ]


def _methods(row: Row) -> str:
    """How each side of a point was timed (Timing.method's words, stored since
    schema v11); "-" for a row stored before, or a side not timed."""
    kernel, library = row.get("timing_method"), row.get("baseline_timing_method")
    if not kernel:
        return "-"
    return f"{kernel}; {library}" if library else kernel


def failure_rows(page: UserPage) -> list[tuple[str, ...]]:
    return [
        (_size(f), str(f.get("block_edge") or "-"), _config(f), str(f.get("kind", "")), str(f.get("reason", "")))
        for f in page.failures
    ]


def plot_lines(page: UserPage) -> dict[str, dict[int, float]]:
    """GFLOPS by square size (the largest of M, N, K) for each line of the plot:
    the user's kernel per block edge and configuration, cuBLAS, and each other
    kernel at its best edge."""
    lines: dict[str, dict[int, float]] = {}

    def put(label: str, row: Row, value: float | None, best: bool = True) -> None:
        if value is None:
            return
        size = max(row["m"], row["n"], row["k"])
        line = lines.setdefault(label, {})
        line[size] = max(line.get(size, 0.0), value) if best else value

    for r in page.rows:
        edge = f" b{r['block_edge']}" if r.get("block_edge") else ""
        config = _config(r)
        put(f"{page.kernel}{edge}{'' if config == '-' else ' ' + config}", r, r.get("gflops"))
    for r in [*page.rows, *page.others]:
        put(r.get("baseline_name") or "cuBLAS", r, r.get("baseline_gflops"))
    for r in page.others:
        if r.get("metric") != "gbs":
            put(f"{r['kernel']} (best edge)", r, r.get("gflops"))
    return lines


def draw_plot(page: UserPage, out: Path) -> str | None:
    """The GFLOPS-against-size plot in ``out`` (PNG, and SVG beside it), its legend
    beside the axes; the PNG's file name, or None without a figure to draw."""
    lines = plot_lines(page)
    if not any(lines.values()):
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    for label, points in lines.items():
        sizes = sorted(points)
        mine = label.startswith(page.kernel)
        ax.plot(sizes, [points[s] for s in sizes], marker="o", linewidth=2.2 if mine else 1.2,
                linestyle="-" if mine else "--", label=label)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (largest of M, N, K)")
    ax.set_ylabel(page.unit)
    ax.set_title(f"{page.kernel} beside cuBLAS and the kernels of the same runs")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return save_figure(fig, out, "gflops_vs_size", f"{page.unit} against size").file


def _html_table(columns: Sequence[str], rows: Sequence[tuple[str, ...]], caption: str) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _csv(columns: Sequence[str], rows: Sequence[tuple[str, ...]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buf.getvalue()


def page_html(page: UserPage, plot: str | None) -> str:
    esc = html.escape
    others = sorted({r["kernel"] for r in page.others})
    compared = ", ".join(others) if others else "no other kernel"
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{esc(page.kernel)}: gemmlab report</title></head><body>",
        f"<p><a href='../index.html'>the whole report</a></p><h1>{esc(page.kernel)}</h1>",
        f"<p>Your kernel, declared in {esc(page.source)}; measured beside cuBLAS and {esc(compared)}.</p>",
    ]
    if plot:
        parts.append(f"<figure><img src='{esc(plot)}' alt='{page.unit} against size'><figcaption>{page.unit} "
                     "against the size: "
                     "your kernel per block edge and configuration (solid), cuBLAS and the other kernels (dashed)."
                     "</figcaption></figure>")  # fmt: skip
    if page.rows:
        parts.append(_html_table(columns(page.unit), table_rows(page), "Results (table.csv)"))
    else:
        parts.append("<p>No point of this kernel was measured.</p>")
    if page.failures:
        parts.append(_html_table(FAILURE_COLUMNS, failure_rows(page), f"Failures ({len(page.failures)})"))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_pages(pages: Sequence[UserPage], root: Path) -> list[tuple[str, str]]:
    """Write every page under ``root``; (kernel, link to its page) for the index."""
    links = []
    for page in pages:
        folder = root / page.folder
        folder.mkdir()
        plot = draw_plot(page, folder)
        (folder / "table.csv").write_text(_csv(columns(page.unit), table_rows(page)), encoding="utf-8")
        (folder / "index.html").write_text(page_html(page, plot), encoding="utf-8")
        links.append((page.kernel, f"{page.folder}/index.html"))
    return links
