"""Where and when a number was measured: recorded with every result."""

from __future__ import annotations

import datetime
import functools
import os
import platform
import subprocess
from pathlib import Path


@functools.cache
def git_revision() -> str | None:
    """The checkout's revision when gemmlab runs from a git tree, else None.
    GEMMLAB_GIT_REVISION overrides it (for copies of a tree without .git)."""
    if os.environ.get("GEMMLAB_GIT_REVISION"):
        return os.environ["GEMMLAB_GIT_REVISION"]
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                           capture_output=True, text=True, timeout=5).stdout.strip()  # fmt: skip
    return out.stdout.strip() + ("-dirty" if dirty else "")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def now_utc() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def host_record() -> dict:
    from gemmlab import __version__

    return {
        "gemmlab_version": __version__,
        "git_revision": git_revision(),
        "cpu": cpu_name(),
        "python": platform.python_version(),
        "date": now_utc(),
    }
