"""gemmlab check's plumbing without a GPU: points shared out among sanitizer
processes run side by side, their summaries added up (a fake sanitizer)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
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


def test_a_run_killed_by_a_signal_says_so(fake_sanitizer: Path) -> None:
    fake_sanitizer.write_text("#!/bin/sh\necho started\nkill -9 $$\n")
    report = sanitize.check(["tiled"], "memcheck", jobs=2)
    assert report.errors == -1
    assert report.findings().splitlines() == [f"{sanitize.EXIT_NOTE} was killed by signal 9 (SIGKILL)"] * 2
    fake_sanitizer.write_text("#!/bin/sh\nexit 3\n")
    assert "exited with status 3" in sanitize.check(["tiled"], "memcheck", jobs=1).findings()


def test_a_check_over_its_time_is_a_clear_error(fake_sanitizer: Path) -> None:
    fake_sanitizer.write_text("#!/bin/sh\nsleep 30\n")
    with pytest.raises(GemmlabError, match="did not finish within 1 s"):
        sanitize.check(["tiled"], "memcheck", timeout=1, jobs=2)


def test_the_per_access_trackers_run_light_shapes_once(fake_sanitizer: Path) -> None:
    racy = str(Path(__file__).parent.parent / "examples" / "faulty" / "missing_sync" / "matmul.toml")
    heavy = [sanitize.parse_point(p)[2] for p in sanitize.points_for([racy], "memcheck")]
    light = [sanitize.parse_point(p)[2] for p in sanitize.points_for([racy], "racecheck")]
    assert max(s.m * s.n * s.k for s in heavy) > sanitize.LIGHT_VOLUME  # memcheck keeps the large ones
    assert light and all(s.m * s.n * s.k <= sanitize.LIGHT_VOLUME for s in light)
    assert set(light) <= set(heavy)
    # A kernel that takes only multiples of its edge, whose small shapes are all
    # large at edge 32, runs one and three tiles of it.
    assert sanitize.light_shapes(catalogue.get("tiled"), 32) == [Shape.square(32), Shape.square(96)]
    race = sanitize.sanitizer_command("racecheck", ["tiled:8:8:8:8"])
    mem = sanitize.sanitizer_command("memcheck", ["tiled:8:8:8:8"])
    assert race[race.index("gemmlab.measure.sanitize") + 1] == "--launches=1"
    assert mem[mem.index("gemmlab.measure.sanitize") + 1] == "--launches=2"


def test_the_child_launches_each_point_as_often_as_it_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    from gemmlab.measure import run

    calls = []
    monkeypatch.setattr(run, "checked_launches", lambda *a, launches: calls.append((*a, launches)))
    assert sanitize._child(["--launches=1", "tiled:8:16:24:32", "naive:0:5:6:7"]) == 0
    assert calls == [("tiled", Shape(16, 24, 32), 8, 1), ("naive", Shape(5, 6, 7), 0, 1)]
    calls.clear()
    sanitize._child(["tiled:8:16:24:32"])
    assert calls == [("tiled", Shape(16, 24, 32), 8, 2)]
