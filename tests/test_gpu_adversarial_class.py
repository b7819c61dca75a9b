"""The adversarial class (tests/adversarial_class) graded on a GPU by
`gemmlab grade` in a process of its own, and checked with no slack: every
honest control graded, every attack ending as expect.toml says, no leak of
the hidden shapes or the grader's paths anywhere a student reads, no process
of an attack left, the database unchanged once the grader has exited, nothing
planted left in the HOME and temporary folder a submission was given."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:  # Python 3.11 and later; tomli (the same parser) before
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from gemmlab.core import processes
from gemmlab.studies import grade

pytestmark = [pytest.mark.gpu, pytest.mark.whole_gpu]

CLASS = Path(__file__).resolve().parent / "adversarial_class"
EXPECT = tomllib.loads((CLASS / "expect.toml").read_text())
MARKER = "gemmlab-adversary"


def _survivors() -> list[str]:
    found = []
    for pid in processes.parents():
        try:
            args = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if MARKER in args:
            found.append(f"{pid}: {args}")
    return found


def test_the_adversarial_class_is_graded_with_no_cheat_no_leak_and_no_honest_failure(tmp_path: Path) -> None:
    work = tmp_path / "grading"
    shutil.copytree(CLASS, work, symlinks=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("GEMMLAB_CACHE", None)
    db, out = work / "grades.sqlite", work / "board"
    started = time.monotonic()
    command = [sys.executable, "-m", "gemmlab", "grade", "class", "--task", "task.toml", "--db", db.name, "--out",
               out.name]  # fmt: skip
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=540)
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after_exit = hashlib.sha256(db.read_bytes()).hexdigest()
    time.sleep(3)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == after_exit, "the database changed after the grader exited"
    assert _survivors() == []

    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    by_name: dict[str, list[dict]] = {}
    for row in rows:
        by_name.setdefault(row["submission"], []).append(row)
    for name, expected in EXPECT.items():
        mine = by_name.get(name, [])
        standing = [r for r in mine if r["stage"] != grade.TAMPERED] or mine
        assert standing, f"{name} is not on the board"
        if expected["outcome"] == "graded":
            assert standing[0]["stage"] == grade.GRADED, (name, standing[0])
        else:
            assert standing[0]["stage"] in expected["stages"] and standing[0]["grade"] == "fail", (name, standing)
            assert all(w in standing[0]["reason"] for w in expected["words"]), (name, standing[0]["reason"])
        if expected.get("forged_row"):
            assert any(r["stage"] == grade.TAMPERED for r in mine), (name, mine)

    task = grade.load_task(work / "task.toml")
    public = {d for s in task.public for d in (s.m, s.n, s.k)}
    secret_forms = [str(task.hidden_rule.seed)]
    for s in task.hidden:
        secret_forms += [f"{s.m}x{s.n}x{s.k}", f"({s.m}, {s.n}, {s.k})"]
        secret_forms += [f"M={d}" for d in (s.m,) if d not in public]
    secret_forms += [str(work / "task.toml"), str(db), str(home)]
    for page in [out / "leaderboard.csv", *out.rglob("*.html")]:
        text = page.read_text()
        leaked = [form for form in secret_forms if form in text]
        assert not leaked, (page.name, leaked)
    assert not (home / "gemmlab-adversary-planted").exists() and "GEMMLAB_ADVERSARY" not in (
        (home / ".bashrc").read_text() if (home / ".bashrc").exists() else ""
    )
    print(f"graded the adversarial class in {wall:.0f} s")
