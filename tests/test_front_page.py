"""The README stays a front page, and the Markdown pages point only at what
exists: the README at most 200 lines with an index naming every page of
docs/, benchmarks/README.md naming every script, and every relative link of
the pages (an anchor included) resolving to a file and a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text with its code blocks and code spans taken out: `a[i](x)` in
    code is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if "://" not in t and not t.startswith("mailto:")]


def anchors(page: Path) -> set[str]:
    """The ids GitHub gives the page's headings: lower case, punctuation but
    hyphens and underscores dropped, spaces made hyphens, repeats numbered."""
    found: set[str] = set()
    repeats: dict[str, int] = {}
    for line in FENCE.sub("", page.read_text()).splitlines():
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        n = repeats.get(slug, 0)
        repeats[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text().splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, broken


def test_the_link_finder_skips_code_and_sees_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A title\n\n## Grading a class\n\nSee [x](other.md#a) and `k[g](...)`.\n```\n[no](link)\n```\n")
    assert relative_links(page) == ["other.md#a"]
    assert {"a-title", "grading-a-class"} <= anchors(page)


def test_the_readme_indexes_every_document() -> None:
    linked = {t.partition("#")[0] for t in relative_links(README)}
    missing = [f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in linked]
    assert not missing, f"README.md's Documentation index lacks {missing}"


def test_the_benchmarks_index_names_every_script() -> None:
    index = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = [p.name for p in sorted((ROOT / "benchmarks" / "scripts").iterdir()) if p.suffix in (".py", ".sh")]
    missing = [name for name in scripts if f"`{name}`" not in index]
    assert not missing, f"benchmarks/README.md does not describe {missing}"
