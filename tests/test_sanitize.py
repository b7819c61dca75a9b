"""gemmlab check's plumbing without a GPU: points shared out among sanitizer
processes run side by side, their summaries added up (a fake sanitizer)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gemmlab.core.errors import GemmlabError
from gemmlab.measure import sanitize

# A stand-in for compute-sanitizer: prints the points it was given and a summary;
# a share holding a point of edge 8 "finds" two errors.
FAKE = """#!/bin/sh
points=$(echo "$@" | tr ' ' '\\n' | grep -c ':')
case "$*" in *":8:"*) found=2 ;; *) found=0 ;; esac
echo "ran $points points"
echo "========= ERROR SUMMARY: $found errors"
"""


@pytest.fixture
def fake_sanitizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "compute-sanitizer"
    path.write_text(FAKE)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sanitize, "find_sanitizer", lambda: str(path))
    return path


def test_points_are_dealt_out_in_turn() -> None:
    assert sanitize.split(list("abcdefg"), 3) == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert sanitize.split(["a"], 4) == [["a"]]


def test_the_shares_run_side_by_side_and_their_findings_add_up(fake_sanitizer: Path) -> None:
    report = sanitize.check(["tiled"], "memcheck", jobs=3)
    assert report.output.count("ERROR SUMMARY") == 3
    ran = sum(int(line.split()[1]) for line in report.output.splitlines() if line.startswith("ran "))
    assert ran == report.points == len(sanitize.points_for(["tiled"]))
    # Each share holding a point of edge 8 "finds" two errors; the report adds them up.
    shares = sanitize.split(sanitize.points_for(["tiled"]), 3)
    assert report.errors == 2 * sum(any(":8:" in p for p in share) for share in shares) > 0
    clean = sanitize.check(["naive_uncoalesced"], "memcheck", jobs=2)  # edge 32 only: nothing found
    assert clean.clean and clean.output.count("ERROR SUMMARY") == 2


def test_a_share_without_a_summary_is_not_clean(fake_sanitizer: Path) -> None:
    fake_sanitizer.write_text("#!/bin/sh\necho crashed\nexit 1\n")
    assert sanitize.check(["tiled"], "memcheck", jobs=2).errors == -1


def test_a_check_over_its_time_is_a_clear_error(fake_sanitizer: Path) -> None:
    fake_sanitizer.write_text("#!/bin/sh\nsleep 30\n")
    with pytest.raises(GemmlabError, match="did not finish within 1 s"):
        sanitize.check(["tiled"], "memcheck", timeout=1, jobs=2)
