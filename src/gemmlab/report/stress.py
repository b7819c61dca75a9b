"""The report's section for `gemmlab stress`: per stress run, each kernel's
tally of checked launches and failures, and the failed draws with the
command that replays each one.

The store keeps a run's tallies and failed draws in tables of their own
(:meth:`gemmlab.store.store.Store.add_stress`), tied to the run that says
on which GPU and when.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gemmlab.report.model import readable_time, time_span
from gemmlab.store.rows import STRESS_FAILURE_FIELDS, STRESS_SUMMARY_FIELDS

ANCHOR = "stress-runs"
TITLE = "Stress runs"
# Failed draws listed per run on the page; the CSV holds them all.
LISTED = 20
COLUMNS = ("kernel", "launches", "wrong", "faults", "hangs", "errors", "shapes")


@dataclass
class StressRun:
    """One stress run: where and when, and what it stored."""

    run_id: int | None
    device: str
    date: str | None
    summaries: list[dict]
    failures: list[dict]

    @property
    def failed(self) -> int:
        return sum(s["wrong"] + s["faults"] + s["hangs"] + s["errors"] for s in self.summaries)

    def setting(self) -> str:
        """How the run was set up: its length, processes, seeds and load."""
        first = self.summaries[0] if self.summaries else {}
        seeds = json.loads(first.get("seeds") or "[]")
        seed_text = f"seeds {seeds[0]} to {seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}" if seeds else ""
        parts = [f"{first['seconds']:.0f} s" if first.get("seconds") is not None else "",
                 f"{first['processes']} processes" if first.get("processes") else "", seed_text,
                 "beside a cuBLAS load" if first.get("load") else "no load"]  # fmt: skip
        return ", ".join(p for p in parts if p)


def stress_runs(summaries: Sequence[dict], failures: Sequence[dict], runs: Sequence[dict]) -> list[StressRun]:
    """The stored stress tallies and failures grouped by run, oldest first."""
    by_id = {r["id"]: r for r in runs}
    found: dict[int | None, StressRun] = {}
    for row in [*summaries, *failures]:
        run_id = row.get("run_id")
        if run_id not in found:
            run = by_id.get(run_id, {})
            gpu = run.get("gpu_name") or "a GPU not recorded"
            found[run_id] = StressRun(run_id, str(gpu), run.get("started") or row.get("created"), [], [])
    for row in summaries:
        found[row.get("run_id")].summaries.append(row)
    for row in failures:
        found[row.get("run_id")].failures.append(row)
    return sorted(found.values(), key=lambda r: (r.run_id is None, r.run_id or 0))


def replay_command(failure: dict) -> str:
    """The command that checks one failed draw again, alone."""
    return (f"gemmlab stress {failure['kernel']} --replay {failure['seed']}:{failure['draw']} "
            f"--max-dim {failure['max_dim']}")  # fmt: skip


def summary_line(runs: Sequence[StressRun]) -> str:
    kernels = len({s["kernel"] for r in runs for s in r.summaries})
    launches = sum(s["launches"] for r in runs for s in r.summaries)
    failed = sum(r.failed for r in runs)
    devices = " and ".join(dict.fromkeys(r.device for r in runs))
    return (f"{devices}, measured {time_span(r.date for r in runs)}; {len(runs)} run{'s' * (len(runs) != 1)}, "
            f"{kernels} kernel{'s' * (kernels != 1)}, {launches:,} checked launches, {failed} failed")  # fmt: skip


def summaries_csv(runs: Sequence[StressRun]) -> str:
    return _csv(("run_id", "gpu_name", "date", *STRESS_SUMMARY_FIELDS), runs, "summaries")


def failures_csv(runs: Sequence[StressRun]) -> str:
    return _csv(("run_id", "gpu_name", "date", *STRESS_FAILURE_FIELDS, "replay"), runs, "failures")


def _csv(header: Sequence[str], runs: Sequence[StressRun], which: str) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for run in runs:
        for row in getattr(run, which):
            extra = {"run_id": run.run_id, "gpu_name": run.device, "date": run.date or ""}
            if which == "failures":
                extra["replay"] = replay_command(row)
            writer.writerow([extra[h] if h in extra else row.get(h) for h in header])
    return buf.getvalue()


def _run_html(run: StressRun, folder: str) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{s[c]:,}</td>" if isinstance(s[c], int) else f"<td>{esc(str(s[c]))}</td>"
                         for c in COLUMNS) + "</tr>"
        for s in run.summaries
    )  # fmt: skip
    when = readable_time(run.date) if run.date else "date not recorded"
    caption = f"Run {run.run_id} on {run.device}, {when}: {run.setting()}"
    parts = [f"<table><caption>{esc(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"]
    if run.failures:
        items = "".join(
            f"<li class='warn'>{esc(f['kind'])}: {esc(f['kernel'])} {f['m']}x{f['n']}x{f['k']}, block edge "
            f"{f['block_edge']}, {esc(f['dtype'])} (process {f['process']}): {esc(f['reason'])}<br>"
            f"<small>replay: <code>{esc(replay_command(f))}</code></small></li>"
            for f in run.failures[:LISTED]
        )
        more = len(run.failures) - LISTED
        rest = f"<p>And {more} more in <a href='{esc(folder)}/failures.csv'>failures.csv</a>.</p>" if more > 0 else ""
        parts.append(f"<p>Failed draws of run {run.run_id}:</p><ol>{items}</ol>{rest}")
    return "\n".join(parts)


def section_html(runs: Sequence[StressRun], folder: str) -> str:
    esc = html.escape
    parts = [
        f"<section id='{ANCHOR}'><h2>{TITLE}</h2>",
        f"<p class='summary'>{esc(summary_line(runs))}</p>",
        "<p>Kernels checked on random shapes by several processes sharing the GPU (`gemmlab stress`): each draw "
        "launched several times from a poisoned output and checked; wrong results, faults, hangs and errors are "
        f"counted per kernel. As CSV: <a href='{esc(folder)}/summaries.csv'>{esc(folder)}/summaries.csv</a>, "
        f"<a href='{esc(folder)}/failures.csv'>{esc(folder)}/failures.csv</a>.</p>",
    ]
    parts += [_run_html(run, folder) for run in runs]
    parts.append("</section>")
    return "\n".join(parts)


def write(runs: Sequence[StressRun], root: Path) -> str:
    """The section's CSV files in its folder under ``root``, and its HTML."""
    folder = root / ANCHOR
    folder.mkdir(exist_ok=True)
    (folder / "summaries.csv").write_text(summaries_csv(runs), encoding="utf-8")
    (folder / "failures.csv").write_text(failures_csv(runs), encoding="utf-8")
    return section_html(runs, ANCHOR)
