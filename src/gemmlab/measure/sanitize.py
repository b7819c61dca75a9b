"""Run kernels, the catalogue's or a user's, under NVIDIA's compute-sanitizer.

The parent (``check``) starts ``compute-sanitizer --tool T python -m
gemmlab.measure.sanitize POINT...``; the child runs each point once through the normal
runner (so inputs, launch and verification are the real ones) and the parent
reads the sanitizer's summary. Zero reports is the bar.

A point names its kernel by :func:`gemmlab.kernels.catalogue.reference`: a
user's kernel by its declaration's absolute path, which the child reads again.
The child compiles with line tables (``GEMMLAB_LINEINFO``), so a finding names
the file and line of the kernel's source, the user's own file for a user's kernel.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from gemmlab.backends.nvrtc import LINEINFO_ENV
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.problems.base import NO_BANDS_VARIABLE

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
# Where compute-sanitizer lives when it is not on PATH: the toolkit's bin
# folder and the standalone package's folders.
SANITIZER_SEARCH_DIRS: tuple[str, ...] = (
    "/usr/local/cuda/bin",
    "/opt/nvidia/compute-sanitizer",
    "/usr/local/cuda/compute-sanitizer",
)
_SUMMARY = re.compile(r"(ERROR|RACECHECK) SUMMARY: (\d+) (errors|hazards)")
_RACE_ERRORS = re.compile(r"\((\d+) errors?, (\d+) warnings?\)")

# Begins the line added to a sanitizer run's output when it exits non-zero, so
# that a run that printed no finding (killed, or crashed before its summary)
# still says how it ended.
EXIT_NOTE = "[gemmlab] the run under the sanitizer"


@dataclass(frozen=True)
class SanitizerReport:
    tool: str
    points: int
    errors: int
    output: str

    @property
    def clean(self) -> bool:
        return self.errors == 0

    def findings(self, limit: int = 60) -> str:
        """The sanitizer's own lines, without host backtraces, and any Python error."""
        keep = [
            line
            for line in self.output.splitlines()
            if ("=========" in line and "Host Frame" not in line and "Saved host backtrace" not in line)
            or "Error" in line
            or line.startswith(EXIT_NOTE)
        ]
        return "\n".join(keep[:limit])


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


def parse_summary(tool: str, output: str) -> int:
    """Errors the sanitizer reported; a missing summary counts as a failure."""
    m = _SUMMARY.search(output)
    if not m:
        return -1
    if tool == "racecheck":
        r = _RACE_ERRORS.search(output[m.start() :])
        return int(r.group(1)) + int(r.group(2)) if r else int(m.group(2))
    return int(m.group(2))


# Sanitizer processes run side by side: each point is slow under the sanitizer
# (every access is watched) and the GPU is mostly idle, so a check of the whole
# catalogue (430 points) shares them out among this many.
DEFAULT_JOBS = 4


def check(
    kernel_ids: list[str] | None = None, tool: str = "memcheck", timeout: float = 1800, jobs: int | None = None
) -> SanitizerReport:
    """Every point of ``kernel_ids`` (default: the catalogue) under the sanitizer
    ``tool``, in ``jobs`` processes side by side (default: up to
    :data:`DEFAULT_JOBS`, one per point at most); the report adds their findings."""
    if tool not in TOOLS:
        raise GemmlabError(f"Unknown sanitizer tool '{tool}'.", f"Use one of {', '.join(TOOLS)}.")
    ids = [catalogue.get(kid).id for kid in kernel_ids or catalogue.kernel_ids()]
    points = points_for(ids, tool)
    if not points:
        raise GemmlabError(
            f"No small size that {', '.join(ids)} accepts was found to check.",
            "Loosen the declaration's `accepts`, or check the kernel with `gemmlab run` at a size it takes.",
        )
    # No guard bands around the outputs, so the sanitizer sees their true edges;
    # and for a user's kernel line tables, so a finding names the user's file and
    # line. Only then: a kernel with them compiles anew (another cache key),
    # under the sanitizer, and the catalogue's every rung would take minutes.
    env = {**os.environ, NO_BANDS_VARIABLE: "0"}
    if any(catalogue.get(kid).declaration is not None for kid in ids):
        env[LINEINFO_ENV] = "1"
    shares = split(points, jobs or DEFAULT_JOBS)
    outputs, failed = _run_side_by_side([sanitizer_command(tool, share) for share in shares], env, timeout, tool)
    output = "\n".join(outputs)
    counts = [parse_summary(tool, text) for text in outputs]
    # A share with no summary (its child crashed) counts as -1 unless another reported hazards.
    errors = sum(c for c in counts if c > 0) or (-1 if min(counts) < 0 else 0)
    if failed and errors == 0:
        errors = -1  # a child failed (a wrong result, a crash) although no hazard was printed
    return SanitizerReport(tool, len(points), errors, output)


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


def _run_side_by_side(commands: list[list[str]], env: dict, timeout: float, tool: str) -> tuple[list[str], bool]:
    """Each command's output (stdout then stderr), and whether any exited non-zero.
    Output goes to files, not pipes: a child that prints much would block on a
    full pipe that nobody reads while this waits for another."""
    deadline = time.monotonic() + timeout
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in commands]
        procs = [subprocess.Popen(c, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
                 for c, log in zip(commands, logs, strict=True)]  # fmt: skip
        try:
            codes = [proc.wait(timeout=max(0.0, deadline - time.monotonic())) for proc in procs]
        except subprocess.TimeoutExpired:
            for proc in procs:
                proc.kill()
                proc.wait()
            raise GemmlabError(
                f"compute-sanitizer ({tool}) did not finish within {timeout:.0f} s.",
                "Check fewer kernels at a time (name them), or give the check more time.",
            ) from None
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        outputs = []
        for log, code in zip(logs, codes, strict=True):
            log.seek(0)
            outputs.append(log.read() + (f"\n{EXIT_NOTE} {exit_words(code)}\n" if code != 0 else ""))
    return outputs, any(code != 0 for code in codes)


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
    from gemmlab.measure.run import checked_launches

    launches = 2
    if args and args[0].startswith("--launches="):
        launches = int(args[0].split("=", 1)[1])
        args = args[1:]
    for p in args:
        kernel, edge, shape = parse_point(p)
        # Checked launches and nothing timed: under the sanitizer every launch is
        # slow, and the timing, the library and a second input set add nothing it looks at.
        checked_launches(kernel, shape, edge, launches=launches)
        print(f"ran {p}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
