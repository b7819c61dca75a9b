"""A task's leaderboard (`gemmlab grade`): each submission's latest attempt,
ranked by its geometric-mean share of cuBLAS, with its grade, how many times
it was submitted, and for those that failed the stage and the reason.

Written as CSV (for a gradebook) and as one HTML page with nothing to load,
which links each submission to a page of its own (:func:`submission_page`):
its verdict and reason (a compile log, a sanitizer's findings), its time
beside cuBLAS at every shape, its kernel's occupancy, its Nsight Compute
profile where grading made one (`gemmlab grade --profile`) and its attempts."""

from __future__ import annotations

import csv
import dataclasses
import html
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gemmlab.core.timing import overlap
from gemmlab.report.model import readable_time, slug
from gemmlab.report.user_pages import COLUMNS as RESULT_COLUMNS
from gemmlab.report.user_pages import UserPage, table_rows
from gemmlab.store.records import Grade

COLUMNS = ("rank", "submission", "grade", "share_geomean", "share_interval", "stage", "reason", "attempts", "wall_s",
           "graded")  # fmt: skip
# Where each submission's page goes, beside leaderboard.html.
PAGES = "submissions"
PASSED = "graded"
# Nsight Compute's rule of thumb (its Speed Of Light section): a kernel whose
# SM and DRAM throughput are both under 60% of their peaks is bound by latency,
# not by either unit; otherwise by the unit nearer its peak.
NEAR_PEAK_PCT = 60.0


def standings(grades: Sequence[Grade], trust: Callable[[Grade], bool | None] | None = None) -> list[dict]:
    """One row per submission from the grades table's rows (every attempt): its
    latest attempt, ranked. Those that passed every stage come first, fastest
    first, ranked 1, 2, ...; the failed ones follow without a rank, those that
    got furthest first, then by name. ``trust`` (gemmlab.studies.grade.trusted,
    bound to the key): a row it says the grader did not write as it is takes
    no part in a submission's standing, and is listed as a row of its own,
    failed at the stage "isolation" with its attempt named; a row from before
    signatures (None) stands, marked so."""
    latest: dict[str, Grade] = {}
    attempts: dict[str, int] = {}
    tampered: list[dict] = []
    for row in grades:
        name = row.submission
        verdict = trust(row) if trust is not None else True
        if verdict is False:
            tampered.append(_tampered_row(row))
            continue
        attempts[name] = max(attempts.get(name, 0), row.attempt)
        if name not in latest or row.attempt > latest[name].attempt:
            latest[name] = dataclasses.replace(row, reason=_unsigned(row.reason)) if verdict is None and trust else row
    rows = [_row(row, attempts[name]) for name, row in latest.items()] + tampered
    passed = sorted(
        (r for r in rows if r["stage"] == PASSED), key=lambda r: (-(r["share_geomean"] or 0.0), r["submission"])
    )
    failed = sorted((r for r in rows if r["stage"] != PASSED), key=lambda r: (-_progress(r["stage"]), r["submission"]))
    for i, ranked in enumerate(passed, 1):
        ranked["rank"] = i
    return passed + failed


def _row(row: Grade, attempts: int) -> dict:
    return {"rank": None, "submission": row.submission, "grade": row.grade, "share_geomean": row.share_geomean,
            "stage": row.stage, "reason": row.reason or "", "attempts": attempts, "wall_s": row.wall_s,
            "graded": row.created, "share_interval": None, "noise": ""}  # fmt: skip


TAMPERED = "isolation"


def _tampered_row(row: Grade) -> dict:
    """A grades row the grader did not write as it is, shown as itself."""
    return {"rank": None, "submission": row.submission, "grade": "fail", "share_geomean": None, "stage": TAMPERED,
            "reason": (f"{TAMPERED}: attempt {row.attempt} of {row.submission} in the database was not written "
                       "by the grader as it is (its signature does not hold): another process wrote or changed it. "
                       "It counts for nothing; grade the class again as another user or in a container "
                       "(docs/grading.md, 'What isolation covers')."),
            "attempts": row.attempt, "wall_s": None, "graded": row.created, "share_interval": None,
            "noise": ""}  # fmt: skip


def _unsigned(reason: str | None) -> str:
    return "; ".join(t for t in (reason, "graded before verdicts were signed: not checked") if t)


def share_interval(results: Sequence[dict]) -> tuple[float, float] | None:
    """The interval of a submission's geometric-mean share: the geometric
    means of its shapes' 95% intervals (results rows' ratio_low, ratio_high);
    None unless every shape has one."""
    lows = [r.get("ratio_low") for r in results]
    highs = [r.get("ratio_high") for r in results]
    if not results or any(v is None or v <= 0 for v in lows + highs):
        return None
    low, high = ([v for v in values if v is not None] for values in (lows, highs))  # all of them, as checked
    return (math.exp(sum(map(math.log, low)) / len(low)), math.exp(sum(map(math.log, high)) / len(high)))


def mark_noise(rows: list[dict]) -> None:
    """Each ranked row whose share's interval overlaps the next one's says it
    is within noise of it: the two are not told apart by this grading."""
    ranked = [r for r in rows if r["rank"]]
    for row, below in itertools.pairwise(ranked):
        if overlap(row["share_interval"], below["share_interval"]):
            row["noise"] = f"within noise of {below['submission']}"


def _progress(stage: str) -> int:
    """How far a failed submission got: the later its failing stage, the further."""
    order = ("compile", "sanitize", "verify", "time")
    return order.index(stage) if stage in order else -1


def share_text(share: float | None) -> str:
    return "" if share is None else f"{share:.3f}"


def interval_text(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f"{interval[0]:.3f}-{interval[1]:.3f}"


def seconds_text(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.1f}"


def page_link(submission: str) -> str:
    """The page of ``submission``, relative to leaderboard.html."""
    return f"{PAGES}/{slug(submission)}.html"


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**{k: row[k] for k in COLUMNS}, "rank": row["rank"] or "",
                             "share_geomean": share_text(row["share_geomean"]),
                             "share_interval": interval_text(row["share_interval"]),
                             "reason": "; ".join(t for t in (row["noise"], row["reason"]) if t),
                             "wall_s": seconds_text(row["wall_s"])})  # fmt: skip


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
thead th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { color: #8a1f11; }
pre { margin: 0; white-space: pre-wrap; font-size: 0.85em; max-width: 50em; }
"""


def leaderboard_html(
    task: str, rows: Sequence[dict], bars: Sequence[tuple[str, float | None]] = (), grades: Sequence[Grade] = (),
    isolation: str = "",
) -> str:  # fmt: skip
    """The page: the task, its grade bars, the table of :func:`standings` and
    every attempt (``grades``, the grades table's rows)."""
    e = html.escape
    bar_text = ", ".join(f"{e(name)}: {'verified' if bar is None else f'{bar:g} of cuBLAS'}" for name, bar in bars)
    body = "\n".join(_html_row(row) for row in rows)
    head = "".join(f"<th>{e(c.replace('_', ' '))}</th>" for c in COLUMNS)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Leaderboard: {e(task)}</title><style>{_CSS}</style></head>
<body><h1>Leaderboard: {e(task)}</h1>
<p>Ranked by the geometric mean, over the task's shapes, of each kernel's speed as a share of cuBLAS's on the
grading GPU, with the 95% interval of that share from the alternated samples (two whose intervals overlap
are within noise of each other). {len(rows)} submissions{f"; grades: {bar_text}" if bar_text else ""}.</p>
{f"<p>{e(isolation)}</p>" if isolation else ""}
<table><thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody></table>
{history_html(grades)}
</body></html>
"""


def history_html(grades: Sequence[Grade]) -> str:
    """Every attempt of every submission, by submission: its worklog across resubmissions."""
    e = html.escape
    rows = sorted(grades, key=lambda r: (r.submission, r.attempt))
    body = "\n".join(
        f'<tr><td>{e(r.submission)}</td><td class="num">{r.attempt}</td><td>{e(readable_time(r.created))}</td>'
        f'<td>{e(r.stage)}</td><td>{e(r.grade)}</td><td class="num">{share_text(r.share_geomean)}</td></tr>'
        for r in rows
    )
    head = "".join(f"<th>{c}</th>" for c in ("submission", "attempt", "graded", "stage", "grade", "share geomean"))
    return f"<h2>Attempts</h2>\n<table><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>"


def _html_row(row: dict) -> str:
    e = html.escape
    cells = [
        f'<td class="num">{row["rank"] or ""}</td>',
        f"<td><a href='{e(page_link(row['submission']))}'>{e(row['submission'])}</a></td>",
        f"<td>{e(row['grade'])}</td>",
        f'<td class="num">{share_text(row["share_geomean"])}</td>',
        f'<td class="num">{interval_text(row["share_interval"])}</td>',
        f"<td>{e(row['stage'])}</td>",
        f"<td><pre>{e('; '.join(t for t in (row['noise'], row['reason']) if t))}</pre></td>",
        f'<td class="num">{row["attempts"]}</td>',
        f'<td class="num">{seconds_text(row["wall_s"])}</td>',
        f"<td>{e(str(row['graded']))}</td>",
    ]
    return f'<tr class="{"passed" if row["stage"] == PASSED else "failed"}">{"".join(cells)}</tr>'


def submission_page(
    task: str, row: Grade, attempts: Sequence[Grade], results: Sequence[dict], names: Mapping[tuple, str] = {}
) -> str:  # fmt: skip
    """One submission's page: ``row`` its latest attempt (a grades row),
    ``attempts`` all of them, ``results`` its timed shapes (results rows);
    ``names`` says what to call a shape (m, n, k) instead of its sizes (a
    hidden shape by its number)."""
    e = html.escape
    passed = row.stage == PASSED
    share = f"; {share_text(row.share_geomean)} of cuBLAS (geometric mean)" if passed else ""
    parts = [
        "<!doctype html>",
        f"<html lang='en'><head><meta charset='utf-8'><title>{e(row.submission)}: {e(task)}</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<p><a href='../leaderboard.html'>the leaderboard</a></p><h1>{e(row.submission)}</h1>",
        f"<p>Task {e(task)}, attempt {row.attempt}: grade <b>{e(row.grade)}</b>{share}. "
        f"{'Passed every check' if passed else 'Stopped at the ' + e(row.stage) + ' stage'}; graded in "
        f"{seconds_text(row.wall_s) or '?'} s. File: {e(row.path or '')}.</p>",
    ]
    if row.reason:
        parts.append(f"<h2>Why it stopped</h2><pre>{e(row.reason)}</pre>")
    if results:
        parts.append(_results_table(row, results, names))
        parts.append(_kernels_html(results))
    parts.append(_occupancy_html(row.occupancy))
    parts.append(profile_html(row.profile, passed))
    parts.append(history_html(attempts))
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)


def _results_table(row: Grade, results: Sequence[dict], names: Mapping[tuple, str]) -> str:
    """The timed shapes as the report's user pages show a kernel's points, a hidden shape by its number."""
    page = UserPage(row.submission, row.path or "", list(results), [])
    lines = [(names.get(_mnk(r), line[0]), *line[1:]) for r, line in zip(_by_size(results), table_rows(page),
                                                                           strict=True)]  # fmt: skip
    return _table("Time beside cuBLAS at each shape of the task", RESULT_COLUMNS, lines)


def _kernels_html(results: Sequence[dict]) -> str:
    """What the timed calls ran on the GPU (CUPTI, stored with each result), each kernel once."""
    seen = list(dict.fromkeys(name for r in results for name in r.get("kernels_seen") or []))
    if not seen:
        return ""
    e = html.escape
    return (f"<h2>Kernels the timed calls ran</h2><p>As CUPTI recorded them in the timed windows:</p>"
            f"<ul>{''.join(f'<li><code>{e(name)}</code></li>' for name in seen)}</ul>")  # fmt: skip


def _mnk(row: dict) -> tuple[int, int, int]:
    return (row["m"], row["n"], row["k"])


def _by_size(results: Sequence[dict]) -> list[dict]:
    """``results`` in the order user_pages.table_rows lists them."""
    return sorted(results, key=lambda r: (r["m"] * r["n"] * r["k"], r.get("block_edge") or 0))


def _occupancy_html(text: str | None) -> str:
    if not text:
        return "<h2>Occupancy</h2><p>Not known: the kernel was not timed, or it is a Python function that " \
               "chooses its own launch.</p>"  # fmt: skip
    found = json.loads(text)
    limiting = ", ".join(found.get("limiting_factors", [])) or "-"
    lines = [
        (
            " x ".join(map(str, found["block"])),
            str(found["regs_per_thread"]),
            str(found["smem_requested"]),
            str(found["active_blocks"]),
            str(found["active_warps"]),
            f"{found['occupancy']:.0%}",
            limiting,
        )
    ]
    columns = ("block", "registers per thread", "shared memory per block [B]", "blocks per SM", "warps per SM",
               "occupancy", "limited by")  # fmt: skip
    return _table("Occupancy (theoretical, on the grading GPU)", columns, lines)


def bound_by(figures: Mapping[str, float | None]) -> str | None:
    """What bounds the profiled launch, from its SM and DRAM throughput as
    shares of their peaks (see NEAR_PEAK_PCT); None without both."""
    sm, dram = figures.get("sm_throughput_pct"), figures.get("dram_throughput_pct")
    if sm is None or dram is None:
        return None
    if max(sm, dram) < NEAR_PEAK_PCT:
        return f"latency (neither SM nor DRAM throughput reaches {NEAR_PEAK_PCT:g}% of its peak)"
    return "memory (DRAM throughput nearer its peak)" if dram > sm else "compute (SM throughput nearer its peak)"


def profile_html(text: str | None, passed: bool) -> str:
    """The Profile section: the kept figures of `gemmlab profile` as a table,
    with the kernel and shape profiled; or why there is no profile."""
    e = html.escape
    if not text:
        why = (
            "this attempt was graded without --profile (`gemmlab grade --profile --force` grades it again with one)."
            if passed
            else "only a kernel that passed verification and was timed is profiled."
        )
        return f"<h2>Profile</h2><p>Not profiled: {e(why)}</p>"
    found = json.loads(text)
    shape, dtype = "x".join(map(str, found["shape"])), found["dtype"]
    if "error" in found:
        return (f"<h2>Profile</h2><p>No profile at {e(shape)} ({e(dtype)}): {e(found['error'])}</p>"
                f"<p>Fix: {e(found.get('fix') or '')}</p>")  # fmt: skip
    title = f"Profile (Nsight Compute): {found['kernel']} at {shape} ({dtype})"
    if found.get("block_edge"):
        title += f", block edge {found['block_edge']}"
    if found.get("device"):
        title += f", on {found['device']}"
    return _table(title, ("figure", "measured"), _profile_lines(found["figures"]))


def _profile_lines(figures: Mapping[str, float | None]) -> list[tuple[str, str]]:
    """One line per kept figure with ncu's value (labels and formats from the
    profile's own registry), then what bounds the launch."""
    from gemmlab.measure.ncu.metrics import PROFILED

    lines = []
    for figure in PROFILED:
        if figure.key in figures and figures[figure.key] is not None:
            label = f"{figure.label} [{figure.unit}]" if figure.unit else figure.label
            lines.append((label, f"{figures[figure.key]:{figure.number_format}}"))
    if bound := bound_by(figures):
        lines.append(("bound by", bound))
    return lines


def _table(title: str, columns: Sequence[str], lines: Sequence[Sequence[str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in line) + "</tr>" for line in lines)
    return f"<h2>{e(title)}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_leaderboard(
    out: Path, task: str, grades: Sequence[Grade], bars: Sequence[tuple[str, float | None]] = (),
    results: Sequence[dict] = (), names: Mapping[tuple, str] = {}, trust: Callable[[Grade], bool | None] | None = None,
    isolation: str = "",
) -> list[Path]:  # fmt: skip
    """leaderboard.csv and leaderboard.html in ``out`` (made if missing), and a
    page per submission under ``out/submissions`` (``results``: the task's
    results rows, matched to a submission by the path of its kernel); returns
    the leaderboard's two paths."""
    out.mkdir(parents=True, exist_ok=True)
    rows = standings(grades, trust)
    # Pages, like the board, only from rows the grader wrote (or from before signatures).
    grades = [r for r in grades if trust is None or trust(r) is not False]
    latest_path = {r.submission: r.path for r in sorted(grades, key=lambda r: r.attempt)}
    for row in rows:
        if row["stage"] == PASSED:
            row["share_interval"] = share_interval(
                [r for r in results if r.get("source") == latest_path[row["submission"]]]
            )
    mark_noise(rows)
    csv_path, html_path = out / "leaderboard.csv", out / "leaderboard.html"
    write_csv(csv_path, rows)
    html_path.write_text(leaderboard_html(task, rows, bars, grades, isolation))
    (out / PAGES).mkdir(exist_ok=True)
    for name in {r.submission for r in grades}:
        attempts = [r for r in grades if r.submission == name]
        latest = max(attempts, key=lambda r: r.attempt)
        # Results are replaced per point, so those of the latest attempt are the ones stored.
        mine = [r for r in results if r.get("source") == latest.path] if latest.stage == PASSED else []
        page = submission_page(task, latest, attempts, mine, names)
        (out / page_link(name)).write_text(page, encoding="utf-8")
    return [csv_path, html_path]
