"""Attack: at its import, start a process in a session of its own that keeps
rewriting this submission's rows in the grader's database to an A, then fail
on purpose. Stopped by: the worker's process group, session and descendants
are killed when the stage ends; a row the grader did not write as it is shows
as tampered on itself and counts for nothing."""

import os
import subprocess
import sys


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
_db = os.path.join(_cwd, _option(_args, "--db", "gemmlab-results.sqlite"))
_LOOP = (
    "import sqlite3, sys, time\n"
    "for _ in range(600):\n"
    "    try:\n"
    "        with sqlite3.connect(sys.argv[1], timeout=1) as c:\n"
    "            c.execute(\"UPDATE grades SET grade = 'A', share_geomean = 99.0 \"\n"
    "                      \"WHERE submission = 'daemon_rewriter'\")\n"
    "    except Exception:\n"
    "        pass\n"
    "    time.sleep(0.2)\n"
)
subprocess.Popen(
    [sys.executable, "-c", _LOOP, _db, "gemmlab-adversary"],
    start_new_session=True,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
raise RuntimeError("failing on purpose, with a daemon left behind")

GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
