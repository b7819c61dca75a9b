"""Running Nsight Compute on one point: finding ncu, its command line, and the child it watches.

The parent (:func:`profile_point`) starts::

    ncu --clock-control none --metrics M1,M2,... --kernel-name-base mangled
        --kernel-name <mangled name> --launch-skip 1 --launch-count 1
        --csv --page raw --print-units base
        python -m gemmlab.measure.ncu KERNEL EDGE M N K DTYPE

(with the tensor-core counters too for a kernel that uses the tensor cores),
and the child runs that one point through the normal runner (fresh inputs,
warm-up launch, timed launches, verification), so the launch ncu measures is
one whose output is checked in the same run. The parent reads ncu's raw CSV
page (:mod:`gemmlab.measure.ncu.parse`) and turns the counters into the figures
the documents report (:mod:`gemmlab.measure.ncu.metrics`) beside the models of
the catalogue.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

from gemmlab.backends import PEERS
from gemmlab.core.errors import DeviceLimitError, GemmlabError, ProfilerError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import Point
from gemmlab.measure.ncu.metrics import ProfileResult, metrics_for
from gemmlab.measure.ncu.parse import CHILD_ERROR, CHILD_RESULT, STILL_WORKS, result_from_output

# The child launches the kernel once as a warm-up, then for the timed series,
# then once more to verify. ncu skips the warm-up (its first launch loads the
# module) and measures the first timed launch: that index depends only on the
# warm-up count the child passes, not on how many repetitions the runner plans.
WARMUP_LAUNCHES = 1
PROFILED_LAUNCH = WARMUP_LAUNCHES

# Where ncu lives when it is not on PATH: the CUDA toolkit's bin folder, the
# standalone installer's folders, and the toolkit's bundled copy.
NCU_SEARCH_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/nsight-compute*/ncu",
    "/usr/local/cuda-*/bin/ncu",
    "/usr/local/cuda-*/nsight-compute*/ncu",
)

DEFAULT_TIMEOUT_S = 600.0


# --- running ncu ----------------------------------------------------------------


def missing_ncu_error() -> ProfilerError:
    return ProfilerError(
        "Nsight Compute (ncu) was not found on PATH, in /usr/local/cuda/bin or under /opt/nvidia/nsight-compute.",
        "Install it with the CUDA toolkit (package cuda-nsight-compute-XX-Y, or the standalone installer from "
        "https://developer.nvidia.com/nsight-compute) and put the folder holding `ncu` on PATH. " + STILL_WORKS,
    )


def find_ncu() -> str:
    """The ncu executable: PATH first, then the usual install folders (newest first)."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_SEARCH_GLOBS:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    raise missing_ncu_error()


def ncu_missing() -> ProfilerError | None:
    """Why Nsight Compute cannot profile on this machine (:func:`find_ncu` finds
    no ncu), or None when it can. What asked for profiles goes on without them: a
    sweep measures and stores its timings all the same, and grading its grades
    (each page says why it has no profile)."""
    try:
        find_ncu()
    except ProfilerError as exc:
        return exc
    return None


def mangled_name(point: Point) -> str:
    """The kernel's mangled name: it carries the template arguments, so `tiled<float, 16>`
    never matches `tiled_2x2` or another edge. The name does not depend on the
    architecture, so the oldest target the kernel compiles for will do (the compile
    is cached); bf16 mma.sync needs sm_80, wgmma sm_90a."""
    from gemmlab.backends.nvrtc import KNOWN_ARCHS, compile_kernel

    if point.spec.backend == "python":  # a user's Python function: its kernel is named by Triton or the declaration
        from gemmlab.kernels.callables import profiled_name

        return profiled_name(point.spec)  # type: ignore[arg-type]
    if point.spec.backend == PEERS:  # a Triton or CuTe DSL rung: the name its compiler gives the kernel
        return point.spec.kernel_name  # type: ignore[attr-defined]
    targets = (_target(point, arch) for arch in KNOWN_ARCHS)
    arch = next(target for target in targets if target)
    return compile_kernel(point.spec, point.block_edge, point.dtype, arch).mangled_name


def _target(point: Point, arch: str) -> str | None:
    """What the catalogue compiles ``point``'s kernel for on ``arch`` (sm_90 -> sm_90a), or None."""
    try:
        return point.spec.compile_arch(arch)
    except DeviceLimitError:
        return None


def ncu_command(
    ncu: str, kernel_name: str, point: Point, python: str = sys.executable, skip: int = PROFILED_LAUNCH
) -> list[str]:
    """The whole command line that profiles ``point`` (pure); ``skip``: the
    launches of the kernel before the one measured."""
    s = point.shape
    return [
        ncu,
        "--clock-control", "none",  # leave the clocks as they are; the timing runs see the same
        "--metrics", ",".join(metrics_for(point)),
        "--kernel-name-base", "mangled",
        "--kernel-name", kernel_name,
        "--launch-skip", str(skip),
        "--launch-count", "1",
        "--csv",
        "--page", "raw",
        "--print-units", "base",
        python, "-m", "gemmlab.measure.ncu",
        # A user's kernel by its declaration's path: the child reads it again.
        catalogue.reference(point.spec.id), str(point.block_edge), str(s.m), str(s.n), str(s.k), point.dtype,
    ]  # fmt: skip


def command_for(kernel_id: str, shape: Shape, block_edge: int | None = None, dtype: str | None = None) -> list[str]:
    """Check the point, find ncu, and build the command for it."""
    point = catalogue.point(kernel_id, shape, block_edge, dtype)
    return ncu_command(find_ncu(), mangled_name(point), point, skip=launches_to_skip(point))


def launches_to_skip(point: Point) -> int:
    """Launches of the kernel before the first timed one: the warm-up, and for
    a peer rung the launches its backend makes while it chooses a configuration."""
    if point.spec.backend == PEERS:
        from gemmlab.backends.peers import bind_launches

        return bind_launches(point.spec, point.dtype) + PROFILED_LAUNCH  # type: ignore[arg-type]
    return PROFILED_LAUNCH


def ncu_environment() -> dict[str, str]:
    """The environment ncu runs in: numbers printed with '.' as the decimal point."""
    env = dict(os.environ)
    env.pop("LC_ALL", None)
    env["LC_NUMERIC"] = "C"
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def profile_point(
    kernel_id: str,
    shape: Shape,
    block_edge: int | None = None,
    dtype: str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> ProfileResult:
    """Profile one verified launch of ``kernel_id`` on ``shape`` under Nsight Compute.

    Raises ConstraintError before starting anything when the point cannot run,
    ProfilerError when ncu is missing or cannot read the counters, and the
    child's own error (VerificationError, DeviceLimitError...) when the run fails.
    """
    point = catalogue.point(kernel_id, shape, block_edge, dtype)
    command = ncu_command(find_ncu(), mangled_name(point), point, skip=launches_to_skip(point))
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ncu_environment())
    except subprocess.TimeoutExpired:
        raise ProfilerError(
            f"ncu did not finish profiling {point.spec.id} on {shape} within {timeout:.0f} s.",
            "Profile a smaller size: ncu replays the launch once per group of counters.",
        ) from None
    return result_from_output(point, proc.stdout + "\n" + proc.stderr, command, proc.returncode)


# --- the child ------------------------------------------------------------------


def _child(argv: list[str]) -> int:
    """Run one point through the runner; ncu measures its first timed launch."""
    kernel_id, edge, m, n, k, dtype = argv
    from gemmlab.measure.run import run

    try:
        result = run(kernel_id, Shape(int(m), int(n), int(k)), int(edge), dtype, reps=1,
                     warmup=WARMUP_LAUNCHES, baseline=False)  # fmt: skip
    except GemmlabError as exc:
        info: dict[str, object] = {"type": type(exc).__name__, "cause": exc.cause, "fix": exc.fix}
        print(CHILD_ERROR + json.dumps(info), flush=True)
        return exc.exit_code
    info = {"device": result.device.get("name", ""), "error": result.error, "arch": result.arch}
    print(CHILD_RESULT + json.dumps(info), flush=True)
    return 0
