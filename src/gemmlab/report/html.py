"""The report's page, ``index.html``: every section's summary, plots, tables,
occupancy and warnings; no server and no JavaScript needed."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from gemmlab.report.drawing import Plot
from gemmlab.report.model import Section
from gemmlab.report.models import MODELS, Entry, ModelsTable
from gemmlab.report.tables import MetricTable, OccupancyBlock, folded_text, shown_and_folded, summary
from gemmlab.report.warning_text import explain


@dataclass
class SectionOutput:
    section: Section
    tables: list[MetricTable]
    plots: list[Plot]
    occupancy: list[OccupancyBlock]


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.6em 1.2em 1.2em 0; display: inline-table; vertical-align: top; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3em; }
caption small { font-weight: normal; color: #555; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; font-variant-numeric: tabular-nums; }
thead th { background: #f0f0f0; }
tbody th { background: #fafafa; }
.pub { color: #777; }
.warn { color: #b36b00; }
.summary { background: #f5f7fa; padding: 0.5em 0.8em; border-left: 4px solid #4a78b5; }
.note { color: #8a5a00; }
figure { display: inline-block; margin: 0.5em 1em 1em 0; vertical-align: top; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #444; max-width: 60em; }
section { border-top: 2px solid #ddd; margin-top: 2em; }
"""


def index_html(
    outputs: list[SectionOutput], kernels: Sequence[tuple[str, str]] = (), findings: str = "",
    others: Sequence[tuple[str, str, str, str]] = (), note: str = "",
) -> str:  # fmt: skip
    """The page; ``findings``: the summary block (:mod:`.summary`), first after the heading;
    ``kernels``: (user's kernel, link to its own page), listed after the sections;
    ``others``: (anchor, title, one line, HTML) of the sections that are no
    document's experiment (distributed runs, stress runs), after the sections;
    ``note``: said once, below the contents (results older than a schema)."""
    from gemmlab import __version__

    esc = html.escape
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    toc = [f"<li><a href='#{esc(o.section.slug)}'>{esc(o.section.experiment)}</a>: {esc(summary(o.section))}</li>"
           for o in outputs]  # fmt: skip
    toc += [f"<li><a href='#{esc(anchor)}'>{esc(title)}</a>: {esc(line)}</li>" for anchor, title, line, _ in others]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>gemmlab report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>gemmlab report</h1>",
        findings,
        f"<p>Written {esc(now)} by gemmlab {esc(__version__)}. Table cells read <b>ours</b> "
        "<span class='pub'>(published)</span>; the devices are named above each table. "
        "<span class='warn'>⚠n</span> marks a warning, listed at the end of its section.</p>",
        f"<ul>{''.join(toc)}</ul>",
    ]
    if note:
        parts.append(f"<p class='note'><small>{esc(note)}</small></p>")
    if kernels:
        items = "".join(f"<li><a href='{esc(link)}'>{esc(kernel)}</a></li>" for kernel, link in kernels)
        parts.append(f"<h2>Your kernels</h2><p>A page each: results, plot beside cuBLAS, failures.</p><ul>{items}</ul>")
    for o in outputs:
        parts.append(_section_html(o))
    parts += [block for *_, block in others]
    parts.append("</body></html>")
    return "\n".join(parts)


def _section_html(o: SectionOutput) -> str:
    esc = html.escape
    s = o.section
    d = s.slug
    parts = [
        f"<section id='{esc(d)}'><h2>{esc(s.experiment)} on {esc(s.devices())}</h2>",
        f"<p>{esc(s.layout.title)}</p>",
        f"<p class='summary'>{esc(summary(s))}</p>",
        f"<p>All tables as Markdown: <a href='{esc(d)}/tables.md'>{esc(d)}/tables.md</a>"
        + (f"; warnings as CSV: <a href='{esc(d)}/warnings.csv'>{esc(d)}/warnings.csv</a>" if s.notes.texts else "")
        + "</p>",
    ]
    if o.plots:
        parts.append("<h3>Plots</h3>")
        for p in o.plots:
            src = f"{d}/{p.file}"
            parts.append(
                f"<figure><a href='{esc(src)}'><img src='{esc(src)}' alt='{esc(p.caption)}'></a>"
                f"<figcaption>{esc(p.caption)}</figcaption></figure>"
            )
    label = None
    parts.append("<h3>Tables</h3>")
    shown, folded = shown_and_folded(o.tables)
    if folded:
        links = ", ".join(f"<a href='{esc(d)}/{esc(t.file_stem)}.csv'>{esc(t.label)}, {esc(t.shown.short)}</a>"
                          for t in folded if t.published)  # fmt: skip
        alone = f" The document's figures alone, as CSV: {links}." if links else ""
        parts.append(f"<p class='note'>{esc(folded_text(s, folded))}{alone}</p>")
    for t in shown:
        if t.label != label:
            label = t.label
            parts.append(f"<h4>{esc(label)}</h4>")
        parts.append(t.to_html(f"{d}/{t.file_stem}.csv"))
    if o.occupancy:
        parts.append("<h3>Theoretical occupancy</h3>")
        for b in o.occupancy:
            parts.append(_occupancy_html(b))
    if s.notes.texts:
        parts.append("<h3>Warnings</h3><ol>")
        # Told once, in words; the stored text is in warnings.csv.
        parts += [f"<li class='warn'>{esc(explain(text))}</li>" for text in s.notes.texts]
        parts.append("</ol>")
    parts.append("</section>")
    return "\n".join(parts)


def _occupancy_html(block: OccupancyBlock) -> str:
    esc = html.escape
    note = f"<br><small class='note'>{esc(block.note)}</small>" if block.note else ""
    if not block.rows:
        return f"<p><b>{esc(block.title)}</b>{note}</p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in block.columns)
    body = "".join(
        f"<tr><th>{esc(label)}</th>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>"
        for label, cells in block.rows
    )
    return (
        f"<table><caption>{esc(block.title)}{note}</caption>"
        f"<thead><tr><th>block</th>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def dispatch_html(plots: Sequence[Plot], folder: str) -> str:
    """The dispatcher's section: one heatmap of % of cuBLAS per GPU and element type."""
    if not plots:
        return ""
    esc = html.escape
    figures = "".join(
        f"<figure><img src='{esc(folder)}/{esc(p.file)}' alt='{esc(p.caption)}'><figcaption>{esc(p.caption)}"
        "</figcaption></figure>"
        for p in plots
    )
    return (
        "<section id='dispatch'><h2>The dispatcher against cuBLAS</h2><p>Per shape of the suite "
        "(gemmlab/studies/shapes.toml), the pick `gemmlab dispatch tune` stored and each rung it tried, as a share of "
        "cuBLAS's speed on the same GPU; each figure was timed in alternation with cuBLAS, short problems on both "
        f"sides from CUDA graphs or back-to-back launches.</p>{figures}</section>"
    )


def models_html(tables: Sequence[tuple[ModelsTable, Plot]], folder: str, host: str) -> str:
    """The programming-models section: per GPU, the table and its plot, and a
    note naming each rung whose compile could not be timed, and why."""
    if not tables:
        return ""
    esc = html.escape
    parts = [
        "<section id='models'><h2>Programming models: CUDA C++, Triton, CuTe DSL and cuBLAS</h2>",
        "<p>Per element type and shape, the fastest verified rung of each model, in TFLOPS; cuBLAS is the fastest "
        "baseline figure measured beside any rung there. Lines: the rung's file (a CUDA C++ rung's <code>.cu</code> "
        "with its headers inlined), neither blank nor comment lines. Compile: one compile of the rung's default "
        "configuration for the architecture its results ran on, with the compile caches off (NVRTC's, Triton's), "
        f"timed on the host when this report was written ({esc(host)}): seconds of that host's CPU, not of a GPU, "
        "on a machine that need not be the one that measured the results.</p>",
        f"<p>As CSV: <a href='{esc(folder)}/models.csv'>{esc(folder)}/models.csv</a>; as text: "
        f"<a href='{esc(folder)}/models.txt'>{esc(folder)}/models.txt</a>.</p>",
    ]
    for table, plot in tables:
        parts.append(_models_table_html(table))
        src = f"{folder}/{plot.file}"
        parts.append(f"<figure><img src='{esc(src)}' alt='{esc(plot.caption)}'>"
                     f"<figcaption>{esc(plot.caption)}</figcaption></figure>")  # fmt: skip
    parts.append("</section>")
    return "\n".join(parts)


def _models_table_html(table: ModelsTable) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(m)}</th>" for m in MODELS)
    body = "".join(
        f"<tr><th>{esc(r.dtype)}</th><th>{r.m} x {r.n} x {r.k}</th>"
        + "".join(f"<td>{_models_cell(r.best.get(m))}</td>" for m in MODELS)
        + "</tr>"
        for r in table.rows
    )
    notes = "".join(f"<li>{esc(note)}</li>" for note in table.notes)
    unknown = f"<p class='note'>Compile time not measured here (-):</p><ul class='note'>{notes}</ul>" if notes else ""
    return (
        f"<table><caption>On {esc(table.gpu_name)} ({esc(table.arch or 'architecture not recorded')}), TFLOPS"
        f"</caption><thead><tr><th>dtype</th><th>M x N x K</th>{head}</tr></thead><tbody>{body}</tbody></table>"
        + unknown
    )


def _models_cell(entry: Entry | None) -> str:
    if entry is None:
        return "-"
    esc = html.escape
    if entry.lines is None:  # cuBLAS: a figure, no rung of ours
        return f"{entry.gflops / 1e3:.1f}<br><small>{esc(entry.kernel)}</small>"
    compile_s = "-" if entry.compile_s is None else f"{entry.compile_s:.1f} s"
    return (f"{entry.gflops / 1e3:.1f}<br><small>{esc(entry.kernel)}<br>{entry.lines} lines, "
            f"compile {compile_s}</small>")  # fmt: skip
