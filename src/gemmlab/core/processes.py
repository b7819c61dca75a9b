"""The processes a process started, read from Linux's /proc: what the grader
checks for before it times the library, and ends when a submission's stage
is over. Reading, and requests to Linux about this process (:func:`prctl`);
nothing here signals anything."""

from __future__ import annotations

import ctypes
from pathlib import Path

PROC = Path("/proc")
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def prctl(option: int, value: int) -> bool:
    """Linux's prctl(option, value) for this process; False where it failed or
    is not there (another system)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def adopt_orphans() -> bool:
    """Make this process a child subreaper (Linux 3.4 and later): a process
    among its descendants whose parent ends is handed to this process, not to
    init, so it stays a descendant that a sweep finds. Without it a daemon
    started by a short-lived process (a submission imported in the
    sanitizer's run, which then exits) escaped every sweep. False where
    Linux's prctl is not there."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1)


def parents(proc: Path = PROC) -> dict[int, tuple[int, int]]:
    """Every process's (parent pid, session id), by pid; empty where /proc is not Linux's."""
    found: dict[int, tuple[int, int]] = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return found


def descendants(pid: int, table: dict[int, tuple[int, int]] | None = None) -> set[int]:
    """The processes ``pid`` started, and theirs, by parent pid."""
    table = parents() if table is None else table
    children: dict[int, list[int]] = {}
    for child, (parent, _session) in table.items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        if child not in found:
            found.add(child)
            todo += children.get(child, [])
    return found


def ancestors(pid: int, table: dict[int, tuple[int, int]] | None = None) -> set[int]:
    """The processes that started ``pid``, its parent up to the first process (by parent pid)."""
    table = parents() if table is None else table
    found: set[int] = set()
    while pid in table and table[pid][0] > 0 and table[pid][0] not in found:
        pid = table[pid][0]
        found.add(pid)
    return found


def name_of(pid: int, proc: Path = PROC) -> str:
    """A process's command name, or "?" once it is gone."""
    try:
        return (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return "?"
