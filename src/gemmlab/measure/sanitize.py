"""Run kernels, the catalogue's or a user's, under NVIDIA's compute-sanitizer.

The parent (``check``) starts ``compute-sanitizer --tool T python -m
gemmlab.measure.sanitize POINT...``; the child runs each point once through the normal
runner (so inputs, launch and verification are the real ones) and the parent
reads what it printed (:mod:`gemmlab.measure.sanitizer_findings`). Zero reports is the bar.

A point names its kernel by :func:`gemmlab.kernels.catalogue.reference`: a
user's kernel by its declaration's absolute path, which the child reads again.
The child compiles with line tables (``GEMMLAB_LINEINFO``), so a finding names
the file and line of the kernel's source, the user's own file for a user's kernel.

Each kernel is checked in processes of its own, so that the sanitizer's summary
of a process is that kernel's, and a kernel that crashes its process takes no
other kernel's points with it. The child goes on past a point whose result is
wrong: verification is a verdict of its own, and the sanitizer still watches
every launch (a race that also gives a wrong answer is named by racecheck).
It reports each point in one line of its own (:data:`CHILD_MARK`), never a
Python traceback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from gemmlab.backends.nvrtc import LINEINFO_ENV
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.measure.sanitizer_findings import (
    CHILD_MARK,
    EXIT_NOTE,
    KernelCheck,
    SanitizerReport,
    SanitizerRun,
    failed_prefix,
    kernel_check,
    ran_line,
)
from gemmlab.problems.base import NO_BANDS_VARIABLE

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
# Where compute-sanitizer lives when it is not on PATH: the toolkit's bin
# folder and the standalone package's folders.
SANITIZER_SEARCH_DIRS: tuple[str, ...] = (
    "/usr/local/cuda/bin",
    "/opt/nvidia/compute-sanitizer",
    "/usr/local/cuda/compute-sanitizer",
)


def find_sanitizer() -> str:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for root in SANITIZER_SEARCH_DIRS:
        candidate = os.path.join(root, "compute-sanitizer")
        if os.access(candidate, os.X_OK):
            return candidate
    raise GemmlabError(
        "compute-sanitizer was not found on PATH or in /usr/local/cuda.",
        "Install the CUDA toolkit (it ships compute-sanitizer) or add its bin folder to PATH.",
    )


def small_shapes(spec: KernelSpec, block_edge: int) -> list[Shape]:
    """Small shapes the kernel accepts: square, rectangular, and odd where allowed."""
    base = 2 * block_edge if block_edge else 16
    candidates = [
        Shape.square(base * 4),
        Shape(base * 3, base * 5, max(block_edge, 1) * 7),
        Shape(37, 53, 29),
        Shape(1, 33, 65),
        # Odd M and N with K in whole 16-byte pieces (the tensor-core rungs).
        Shape(37, 53, 136),
        # Odd N with no partial tile of K: a block crossing N copies whole tiles of unaligned rows of B.
        Shape(37, 53, 64),
        # One row and one column past 128 x 256: sgemm_edge_strips's edge blocks, both kinds.
        Shape(129, 257, 40),
    ]
    if spec.n_bytes_multiple:
        # C is a tensor map (N in whole 16-byte rows): odd M, and N still short
        # of one tile; K in an odd count of 16-byte pieces of 2-byte elements,
        # then in whole pieces of 1-byte ones (the 8-bit rungs).
        candidates += [Shape(37, 56, 136), Shape(37, 56, 144)]
    if spec.declaration is not None:
        # A user's kernel may take square sizes only, or multiples of its tile:
        # one tile, three tiles, and odd squares for those with bounds checks.
        edge = block_edge or 16
        candidates += [Shape.square(edge), Shape.square(3 * edge), Shape.square(37), Shape.square(100)]
    kept = [s for s in candidates if not spec.violations(s, block_edge, spec.dtypes[0])]
    return list(dict.fromkeys(kept))


# The tools that track every shared-memory access and barrier of every thread
# (racecheck, synccheck) cost far more per access than memcheck: a 256^3 point
# of a 32 x 32 tiled kernel with a race took minutes on an H100. A race or a
# misplaced barrier inside a block shows at any size with a few whole tiles and
# a few steps of the K loop, so under these tools a kernel runs only its
# shapes of at most LIGHT_VOLUME multiply-adds (always at least its smallest
# accepted shape), one launch each.
HEAVY_TOOLS = ("racecheck", "synccheck")
LIGHT_VOLUME = 128**3


def light_shapes(spec: KernelSpec, block_edge: int) -> list[Shape]:
    """The shapes a per-access tracker (racecheck, synccheck) runs: the small
    shapes of at most :data:`LIGHT_VOLUME` multiply-adds; where there are none
    (a kernel that takes only multiples of a large edge), one and three tiles
    of the edge, or else the smallest small shape."""
    light = [s for s in small_shapes(spec, block_edge) if _volume(s) <= LIGHT_VOLUME]
    if light:
        return light
    edge = block_edge or 16
    tiles = [s for s in (Shape.square(edge), Shape.square(3 * edge)) if _volume(s) <= LIGHT_VOLUME]
    light = [s for s in tiles if not spec.violations(s, block_edge, spec.dtypes[0])]
    return light or sorted(small_shapes(spec, block_edge), key=_volume)[:1]


def _volume(shape: Shape) -> int:
    return shape.m * shape.n * shape.k


def points_for(kernel_ids: list[str], tool: str = "memcheck") -> list[str]:
    """Every block edge of every kernel at its small shapes (under ``tool``;
    :func:`light_shapes` for :data:`HEAVY_TOOLS`), as 'kernel:edge:m:n:k', the
    kernel named as another process finds it (:func:`gemmlab.kernels.catalogue.reference`)."""
    shapes_of = light_shapes if tool in HEAVY_TOOLS else small_shapes
    out = []
    for kid in kernel_ids:
        spec = catalogue.get(kid)
        name = catalogue.reference(spec.id)
        for edge in spec.block_edges or (0,):
            out += [point_text(name, edge, s) for s in shapes_of(spec, edge)]
    return out


def point_text(kernel: str, edge: int, shape: Shape) -> str:
    return f"{kernel}:{edge}:{shape.m}:{shape.n}:{shape.k}"


def parse_point(text: str) -> tuple[str, int, Shape]:
    """(kernel, edge, shape) of a :func:`point_text`; the kernel may be a path with colons in it."""
    kernel, edge, m, n, k = text.rsplit(":", 4)
    return kernel, int(edge), Shape(int(m), int(n), int(k))


# Sanitizer processes run side by side: each point is slow under the sanitizer
# (every access is watched) and the GPU is mostly idle, so a check of the whole
# catalogue (430 points) shares them out among this many.
DEFAULT_JOBS = 4


def require_tool(tool: str) -> str:
    if tool not in TOOLS:
        raise GemmlabError(f"Unknown sanitizer tool '{tool}'.", f"Use one of {', '.join(TOOLS)}.")
    return tool


def check(
    kernel_ids: list[str] | None = None, tool: str = "memcheck", timeout: float = 1800, jobs: int | None = None
) -> SanitizerReport:
    """:func:`check_kernels`, raising the error of the first kernel when none
    of them could be checked at all (no small size it takes, out of time)."""
    report = check_kernels(kernel_ids, tool, timeout, jobs)
    if all(k.error is not None for k in report.kernels):
        raise report.kernels[0].error  # type: ignore[misc]
    return report


def check_kernels(
    kernel_ids: list[str] | None = None, tool: str = "memcheck", timeout: float = 1800, jobs: int | None = None
) -> SanitizerReport:
    """Every point of ``kernel_ids`` (default: the catalogue) under the sanitizer
    ``tool``, in at most ``jobs`` processes side by side (default:
    :data:`DEFAULT_JOBS`), each holding points of one kernel; a kernel's
    points are dealt out among several when there are fewer kernels than
    jobs. Whatever happens to one kernel is its :class:`KernelCheck`'s;
    the check as a whole raises only for an unknown tool or kernel."""
    require_tool(tool)
    specs = [catalogue.get(kid) for kid in kernel_ids or catalogue.kernel_ids()]
    planned = {spec.id: points_for([spec.id], tool) for spec in specs}
    # No guard bands around the outputs, so the sanitizer sees their true edges;
    # and for a user's kernel line tables, so a finding names the user's file and
    # line. Only then: a kernel with them compiles anew (another cache key),
    # under the sanitizer, and the catalogue's every rung would take minutes.
    env = {**os.environ, NO_BANDS_VARIABLE: "0"}
    if any(spec.declaration is not None for spec in specs):
        env[LINEINFO_ENV] = "1"
    jobs = jobs or DEFAULT_JOBS
    per_kernel = max(1, jobs // max(1, sum(1 for points in planned.values() if points)))
    shares = [(kid, share) for kid, points in planned.items() if points for share in split(points, per_kernel)]
    runs = _run_pool([sanitizer_command(tool, share) for _, share in shares], env, timeout, jobs)
    kernels = []
    for kid, points in planned.items():
        if not points:
            refusal = GemmlabError(
                f"No small size that {kid} accepts was found to check.",
                "Loosen the declaration's `accepts`, or check the kernel with `gemmlab run` at a size it takes.",
            )
            kernels.append(KernelCheck(kid, tool, (), None, error=refusal))
            continue
        own = [(share, run) for (k, share), run in zip(shares, runs, strict=True) if k == kid]
        kernels.append(kernel_check(kid, tool, own, timeout))
    return SanitizerReport(tool, tuple(kernels))


def split(points: list[str], jobs: int) -> list[list[str]]:
    """``points`` dealt out to at most ``jobs`` shares, in turn: a kernel's
    points (its edges and sizes, listed together) spread over all of them."""
    jobs = max(1, min(jobs, len(points)))
    return [points[i::jobs] for i in range(jobs)]


def sanitizer_command(tool: str, points: list[str]) -> list[str]:
    # API errors are left out: cuda-bindings probes the driver for entry points
    # it may lack (cuGetProcAddress returns "invalid value"), which says nothing
    # about our kernels; a real API failure surfaces as a Python error anyway.
    cmd = [find_sanitizer(), "--tool", tool, "--print-limit", "20", "--report-api-errors", "no"]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "all"]
    # initcheck runs with its defaults: unused-memory tracking is off unless
    # asked for (`--track-unused-memory` is a flag, with no value to pass).
    # One launch a point under the per-access trackers: a race or a barrier
    # fault shows in one, and state kept across launches is memcheck's concern.
    launches = 1 if tool in HEAVY_TOOLS else 2
    return [*cmd, sys.executable, "-m", "gemmlab.measure.sanitize", f"--launches={launches}", *points]


# How often the pool looks for a finished sanitizer run [s].
POLL_S = 0.05


def _run_pool(commands: list[list[str]], env: dict, timeout: float, jobs: int) -> list[SanitizerRun]:
    """Each command run with at most ``jobs`` at a time, all within ``timeout``
    seconds: its output (stdout then stderr) and exit status, with a note where
    it ended badly. Output goes to files, not pipes: a child that prints much
    would block on a full pipe that nobody reads while this waits for another.
    Each run is a session of its own, so that stopping it stops its child too."""
    deadline = time.monotonic() + timeout
    waiting = list(range(len(commands)))
    running: dict[int, tuple[subprocess.Popen, Any]] = {}
    done: dict[int, SanitizerRun] = {}
    with contextlib.ExitStack() as stack:
        try:
            while waiting or running:
                while waiting and len(running) < jobs and time.monotonic() < deadline:
                    i = waiting.pop(0)
                    log = stack.enter_context(tempfile.TemporaryFile("w+"))
                    proc = subprocess.Popen(commands[i], stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
                                            start_new_session=True)  # fmt: skip
                    running[i] = (proc, log)
                for i, (proc, log) in list(running.items()):
                    if proc.poll() is not None:
                        done[i] = _finished(log, proc.returncode, timeout)
                        del running[i]
                if time.monotonic() >= deadline:
                    break
                time.sleep(POLL_S)
        finally:
            for i, (proc, log) in running.items():
                _stop(proc)
                done[i] = _finished(log, None, timeout)
    return [done.get(i) or SanitizerRun(f"{EXIT_NOTE} never started: the time ran out first\n", None)
            for i in range(len(commands))]  # fmt: skip


def _finished(log: Any, code: int | None, timeout: float) -> SanitizerRun:
    log.seek(0)
    text = log.read()
    if code is None:
        text += f"\n{EXIT_NOTE} did not finish within {timeout:.0f} s and was stopped\n"
    elif code != 0:
        text += f"\n{EXIT_NOTE} {exit_words(code)}\n"
    return SanitizerRun(text, code)


def _stop(proc: subprocess.Popen) -> None:
    """Kill the run's whole session: the sanitizer and the Python child it started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def exit_words(code: int) -> str:
    """How a child ended, from its return code (negative: the signal that killed it)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by signal {-code} ({name})"
    return f"exited with status {code}"


def _child(args: list[str]) -> int:
    """Run each point once (or ``--launches=N`` times), checked; one line per
    point, a failure as its error in one line. A Python error that is not
    gemmlab's (a fault the driver reports) leaves the CUDA context unusable,
    so the rest of the points are not run, and the status is 1."""
    launches = 2
    if args and args[0].startswith("--launches="):
        launches = int(args[0].split("=", 1)[1])
        args = args[1:]
    try:
        from gemmlab.measure.run import checked_launches
    except Exception as exc:  # an installation that cannot run anything: one line, as for a point
        print(f"{CHILD_MARK} could not start: {one_line(exc)}", flush=True)
        return 1
    for p in args:
        try:
            kernel, edge, shape = parse_point(p)
            # Checked launches and nothing timed: under the sanitizer every launch is
            # slow, and the timing, the library and a second input set add nothing it looks at.
            checked_launches(kernel, shape, edge, launches=launches)
        except GemmlabError as exc:
            print(failed_prefix(p) + one_line(exc), flush=True)
            continue
        except Exception as exc:
            print(failed_prefix(p) + one_line(exc), flush=True)
            return 1
        print(ran_line(p), flush=True)
    return 0


def one_line(exc: Exception) -> str:
    """An error as one line: its type (which tells a wrong result from a fault) and its message."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
