"""A task's leaderboard (`gemmlab grade`): each submission's latest attempt,
ranked by its geometric-mean share of cuBLAS, with its grade, how many times
it was submitted, and for those that failed the stage and the reason.

Written as CSV (for a gradebook) and as one HTML page with nothing to load."""

from __future__ import annotations

import csv
import html
from collections.abc import Sequence
from pathlib import Path

COLUMNS = ("rank", "submission", "grade", "share_geomean", "stage", "reason", "attempts", "graded")
PASSED = "graded"


def standings(grades: Sequence[dict]) -> list[dict]:
    """One row per submission from the grades table's rows (every attempt): its
    latest attempt, ranked. Those that passed every stage come first, fastest
    first, ranked 1, 2, ...; the failed ones follow without a rank, those that
    got furthest first, then by name."""
    latest: dict[str, dict] = {}
    attempts: dict[str, int] = {}
    for row in grades:
        name = row["submission"]
        attempts[name] = max(attempts.get(name, 0), row["attempt"])
        if name not in latest or row["attempt"] > latest[name]["attempt"]:
            latest[name] = row
    rows = [_row(row, attempts[name]) for name, row in latest.items()]
    passed = sorted(
        (r for r in rows if r["stage"] == PASSED), key=lambda r: (-(r["share_geomean"] or 0.0), r["submission"])
    )
    failed = sorted((r for r in rows if r["stage"] != PASSED), key=lambda r: (-_progress(r["stage"]), r["submission"]))
    for i, row in enumerate(passed, 1):
        row["rank"] = i
    return passed + failed


def _row(row: dict, attempts: int) -> dict:
    keep = ("submission", "grade", "share_geomean", "stage")
    return {"rank": None, **{k: row[k] for k in keep}, "reason": row["reason"] or "", "attempts": attempts,
            "graded": row["created"]}  # fmt: skip


def _progress(stage: str) -> int:
    """How far a failed submission got: the later its failing stage, the further."""
    order = ("compile", "sanitize", "verify", "time")
    return order.index(stage) if stage in order else -1


def share_text(share: float | None) -> str:
    return "" if share is None else f"{share:.3f}"


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "rank": row["rank"] or "", "share_geomean": share_text(row["share_geomean"])})


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
    task: str, rows: Sequence[dict], bars: Sequence[tuple[str, float | None]] = (), grades: Sequence[dict] = ()
) -> str:
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
grading GPU. {len(rows)} submissions{f"; grades: {bar_text}" if bar_text else ""}.</p>
<table><thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody></table>
{history_html(grades)}
</body></html>
"""


def history_html(grades: Sequence[dict]) -> str:
    """Every attempt of every submission, by submission: its worklog across resubmissions."""
    e = html.escape
    rows = sorted(grades, key=lambda r: (r["submission"], r["attempt"]))
    body = "\n".join(
        f'<tr><td>{e(r["submission"])}</td><td class="num">{r["attempt"]}</td><td>{e(str(r["created"]))}</td>'
        f'<td>{e(r["stage"])}</td><td>{e(r["grade"])}</td><td class="num">{share_text(r["share_geomean"])}</td></tr>'
        for r in rows
    )
    head = "".join(f"<th>{c}</th>" for c in ("submission", "attempt", "graded", "stage", "grade", "share geomean"))
    return f"<h2>Attempts</h2>\n<table><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>"


def _html_row(row: dict) -> str:
    e = html.escape
    cells = [
        f'<td class="num">{row["rank"] or ""}</td>',
        f"<td>{e(row['submission'])}</td>",
        f"<td>{e(row['grade'])}</td>",
        f'<td class="num">{share_text(row["share_geomean"])}</td>',
        f"<td>{e(row['stage'])}</td>",
        f"<td><pre>{e(row['reason'])}</pre></td>",
        f'<td class="num">{row["attempts"]}</td>',
        f"<td>{e(str(row['graded']))}</td>",
    ]
    return f'<tr class="{"passed" if row["stage"] == PASSED else "failed"}">{"".join(cells)}</tr>'


def write_leaderboard(out: Path, task: str, grades: Sequence[dict], bars: Sequence[tuple[str, float | None]] = ()
                      ) -> list[Path]:  # fmt: skip
    """leaderboard.csv and leaderboard.html in ``out`` (made if missing); returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    rows = standings(grades)
    csv_path, html_path = out / "leaderboard.csv", out / "leaderboard.html"
    write_csv(csv_path, rows)
    html_path.write_text(leaderboard_html(task, rows, bars, grades))
    return [csv_path, html_path]
