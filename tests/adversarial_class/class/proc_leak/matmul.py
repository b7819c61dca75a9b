"""Attack: find the grader's command line in /proc, load the task with gemmlab's
own loader, and raise an error that holds the seed and every hidden shape (in
several notations) and the task's path, so that the leaderboard shows them.
Stopped by: every reason a student reads is scrubbed."""


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
_message = "no task found"
if _args:
    import os
    from pathlib import Path

    from gemmlab.studies.grade import load_task

    _task = load_task(Path(_cwd) / _option(_args, "--task"))
    _shapes = "; ".join(f"{s.m}x{s.n}x{s.k} ({s.m}, {s.n}, {s.k}) M={s.m} N={s.n} K={s.k}" for s in _task.hidden)
    _message = f"seed {_task.hidden_rule.seed}, hidden {_shapes}, task {_task.path}, cwd {os.getcwd()}"
raise ValueError(_message)

GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
