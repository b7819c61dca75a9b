"""Attack: raise an error holding its own environment and the grader's (read
from /proc), hoping for the grader's settings and paths. Stopped by: the
worker drops the grader's settings; paths in a reason are scrubbed."""

import os


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
raise RuntimeError(f"mine {dict(os.environ)}; the grader's {_environ}; its arguments {_args}; its folder {_cwd}")

GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
