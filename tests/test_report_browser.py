"""The report opened in a real browser: headless Chromium loads ``index.html``
(and every user page beside it), and a small harness page reads back, from
inside the browser, which images failed to decode and whether the summary is
on the page. Links are followed on disk: every relative ``href`` and ``src``
names a file of the report, and every ``#anchor`` an id of its page.

`.ci/run` installs Chromium (Debian's ``chromium``) where it is missing; the
test skips, saying why, only where no Chromium can be found.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from gemmlab.report import write_report

FIXTURE = Path(__file__).parent / "fixtures" / "report_rows.json"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Runs in the harness page: opens the report in a frame, waits for it (and so
# for its images), then writes what it found into <pre id="result"> for --dump-dom.
HARNESS = """<!doctype html><html><body>
<iframe id="page" src="{page}" style="width:1600px;height:1200px"></iframe>
<pre id="result">pending</pre>
<script>
const frame = document.getElementById("page");
frame.addEventListener("load", () => {{
  // A frame's load event comes after every image of it has loaded or failed.
  const doc = frame.contentDocument;
  const images = [...doc.images];
  const failed = images.filter(img => !img.complete || img.naturalWidth === 0).map(img => img.getAttribute("src"));
  document.getElementById("result").textContent = JSON.stringify({{
    title: doc.title,
    images: images.length,
    failed: failed,
    summary: doc.getElementById("findings") !== null,
  }});
}});
</script></body></html>
"""


def find_browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser") / "report"
    write_report(json.loads(FIXTURE.read_text()), out, occupancy=False)
    return out


def open_in_browser(browser: str, page: Path, workdir: Path) -> dict:
    harness = workdir / f"harness-{page.stem}.html"
    harness.write_text(HARNESS.format(page=page.as_uri()))
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
        f"--user-data-dir={workdir / 'profile'}", "--virtual-time-budget=10000", "--dump-dom", harness.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no result from {browser} (exit {done.returncode}): {done.stderr[-2000:]}"
    text = found.group(1).replace("&quot;", '"').replace("&amp;", "&")
    assert text != "pending", f"{page.name} did not finish loading in the browser: {done.stderr[-2000:]}"
    return json.loads(text)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.links += [values[a] or "" for a in ("href", "src") if a in values]
        if values.get("id"):
            self.ids.add(values["id"] or "")


def broken_links(page: Path) -> list[str]:
    """The links of ``page`` that name no file of the report, or no id of their page."""
    parser = _Links()
    parser.feed(page.read_text())
    broken = []
    for link in parser.links:
        parts = urlsplit(link)
        if parts.scheme in ("http", "https", "mailto"):
            continue  # outside the report: not followed
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not target.is_file():
            broken.append(link)
        elif parts.fragment:
            ids = parser.ids if target == page else _ids_of(target)
            if parts.fragment not in ids:
                broken.append(link)
    return broken


def _ids_of(page: Path) -> set[str]:
    parser = _Links()
    parser.feed(page.read_text(errors="replace"))
    return parser.ids


def test_every_link_of_the_report_names_a_file_and_an_anchor_that_exist(report: Path) -> None:
    pages = sorted(report.rglob("*.html"))
    assert report / "index.html" in pages
    for page in pages:
        assert not broken_links(page), (page.name, broken_links(page))


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.png").write_bytes(b"")
    page = tmp_path / "index.html"
    page.write_text('<a href="#top">x</a><img src="there.png"><img src="gone.png"><a href="#nowhere">y</a>'
                    '<h1 id="top">')  # fmt: skip
    assert broken_links(page) == ["gone.png", "#nowhere"]


def test_the_report_opens_in_chromium_with_every_image_and_the_summary(report: Path, tmp_path: Path) -> None:
    browser = find_browser()
    if browser is None:
        pytest.skip("no Chromium on this machine (`.ci/run` installs Debian's chromium where apt can)")
    found = open_in_browser(browser, report / "index.html", tmp_path)
    assert found["images"] > 0, found
    assert found["failed"] == [], found
    assert found["summary"], "the report does not open with its summary (no element with id 'findings')"


def test_the_harness_sees_an_image_that_does_not_load(tmp_path: Path) -> None:
    # The check above can fail: a page with an image of garbage bytes is reported.
    browser = find_browser()
    if browser is None:
        pytest.skip("no Chromium on this machine (`.ci/run` installs Debian's chromium where apt can)")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    page = tmp_path / "page.html"
    page.write_text('<html><head><title>t</title></head><body><img src="bad.png"></body></html>')
    found = open_in_browser(browser, page, tmp_path)
    assert found == {"title": "t", "images": 1, "failed": ["bad.png"], "summary": False}
