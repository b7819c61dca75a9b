"""How the API's objects show themselves in Jupyter: a small HTML table."""

from __future__ import annotations

import html


def html_table(title: str, rows: list[tuple[str, str]]) -> str:
    """``rows`` of (label, value) under ``title``, escaped."""
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(a))}</th>"
                   f"<td style='text-align:right'>{html.escape(str(b))}</td></tr>" for a, b in rows)  # fmt: skip
    return f"<table><caption>{html.escape(title)}</caption>{body}</table>"
