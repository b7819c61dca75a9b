"""Attack: at its import, write into the grader's database a verdict of A for
its own source as it is, so that the grader takes it as graded before and
skips it; then do honest work. Stopped by: verdicts are signed by the grader;
an unsigned row grades nothing and shows as tampered on itself."""

import os
import sqlite3
from pathlib import Path

import cupy as cp


def _grader():
    """The command line and environment of the process running `gemmlab grade`:
    an ancestor, or any process of this user (they are all readable)."""
    import os

    def read(pid, name):
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]

    for pid in sorted((int(p) for p in os.listdir("/proc") if p.isdigit()), reverse=False):
        try:
            args = read(pid, "cmdline")
        except OSError:
            continue
        if "grade" in args and "--task" in args:
            environ = dict(kv.split("=", 1) for kv in read(pid, "environ") if "=" in kv)
            return args, environ, os.readlink(f"/proc/{pid}/cwd")
    return [], {}, "/"


def _option(args, name, default=None):
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else default


_args, _environ, _cwd = _grader()
if _args:
    from gemmlab.studies.grade import find_submissions

    (_me,) = find_submissions([Path(__file__).resolve().parent])
    _task_name = "adversarial-class"
    try:
        with sqlite3.connect(os.path.join(_cwd, _option(_args, "--db", "gemmlab-results.sqlite")), timeout=5) as _c:
            _c.execute(
                "INSERT INTO grades (task, submission, attempt, source_hash, path, stage, grade, share_geomean, "
                "created) VALUES (?, 'db_forger', 99, ?, '', 'graded', 'A', 99.0, '')",
                (_task_name, _me.source_hash),
            )
    except sqlite3.Error:
        pass


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
