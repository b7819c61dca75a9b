"""The stages one submission goes through, the isolation they run in, and its verdict and score.

Each submission goes through four stages, in this order, and stops at the
first that fails, with that stage's reason (:func:`grade_one`):

1. ``compile``: the declaration read and the kernel compiled for the GPU (a
   compile error names the student's own lines); a kernel that refuses a shape
   of the task fails here too.
2. ``sanitize``: compute-sanitizer's memcheck, then racecheck, at small odd
   shapes, before anything is timed.
3. ``verify``: the runner's checks (poison, guard bands, a second input set,
   precision) at every hidden shape, on fresh random inputs.
4. ``time``: every shape of the task timed alternately with cuBLAS; the share
   of each is cuBLAS's time over the kernel's.

With ``profile`` (`gemmlab grade --profile`), a submission that was timed is
then profiled once under Nsight Compute at one public shape
(:func:`profile_stage`). The profile informs its page, never its grade: a
profile that fails (no ncu, counters withheld, a hang) is stored as the
reason there is none, and the verdict stands.

A reason a student reads is scrubbed first of what is hidden from them (:func:`scrubbed`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gemmlab.core.errors import GemmlabError, NoGPUError, failure_text
from gemmlab.core.shapes import Shape
from gemmlab.measure import apart, watchdog
from gemmlab.studies import scale
from gemmlab.studies.grade.submissions import StageFailed, Submission, confined
from gemmlab.studies.grade.task import FAIL, Task, geomean, grade_of, shape_names

# The stages in the order they run; a verdict that passed them all is "graded".
STAGES = ("compile", "sanitize", "verify", "time")
GRADED = "graded"
SANITIZER_TOOLS = ("memcheck", "racecheck")
# Names of a library's GEMM kernels as CUPTI reports them: cuBLAS and
# cuBLASLt (their xmma and nvjet kernels, gemv, split-K reductions) and CUTLASS.
LIBRARY_GEMM = re.compile(r"cublas|cutlass|xmma|nvjet|gemv2?[NT]?_|gemmSN|splitKreduce|gemmk1", re.IGNORECASE)
# Launches per timed batch of a Python submission, each on inputs of its own (gemmlab.measure.apart).
APART_LAUNCHES = 4
# The figures of `gemmlab profile` (gemmlab.measure.ncu.metrics.PROFILED, by key) a
# submission's profile keeps: what its page shows, the rest stays in ncu's output.
PROFILE_FIGURES = ("time_ms", "gflops", "achieved_occupancy", "theoretical_occupancy", "sm_throughput_pct",
                   "dram_throughput_pct", "dram_gbs", "arithmetic_intensity", "tensor_pipe_pct")  # fmt: skip
# ncu gets a step's timeout (Task.call_limit); the worker's call gets this much
# more, for reading the kernel before ncu starts, so that ncu's own limit, whose
# message says what to do, ends a slow profile first.
PROFILE_MARGIN_S = 30.0


def library_kernels(results: Iterable[Any]) -> list[str]:
    """The library GEMM kernels (LIBRARY_GEMM) among what the timed calls of
    ``results`` ran, each once."""
    seen = [name for r in results for name in getattr(r, "kernels_seen", []) or []]
    return list(dict.fromkeys(name for name in seen if LIBRARY_GEMM.search(name)))


@dataclass
class Verdict:
    """What grading one submission found (sent back to the calling process)."""

    submission: str
    path: str
    source_hash: str
    stage: str  # the stage it failed at, or GRADED
    reason: str | None
    shares: dict[str, float] = field(default_factory=dict)  # by "shape dtype"
    share_geomean: float | None = None
    grade: str = FAIL
    results: list[Any] = field(default_factory=list)  # the timed RunResults
    wall_s: float | None = None  # seconds from its first stage to its verdict, on the worker
    occupancy: dict | None = None  # the timed kernel's theoretical occupancy; None when unknown (Python)
    profile: dict | None = None  # see profile_stage; None when not profiled

    def row(self, task: Task) -> dict:
        """The grades table's row (attempt apart)."""
        return {"task": task.name, "submission": self.submission, "source_hash": self.source_hash,
                "path": self.path, "stage": self.stage, "reason": self.reason,
                "share_geomean": self.share_geomean, "grade": self.grade, "wall_s": self.wall_s,
                "occupancy": json.dumps(self.occupancy) if self.occupancy else None,
                "profile": json.dumps(self.profile) if self.profile else None}  # fmt: skip


def compile_on_device(reference: str, task: Task) -> str:
    """In the worker: read the kernel, check it takes every shape of the task in
    every dtype, and compile it for this GPU; returns the arch compiled for."""
    from gemmlab import backends
    from gemmlab.backends.base import DeviceBackend
    from gemmlab.core import gpu
    from gemmlab.kernels import catalogue

    spec = catalogue.get(reference)
    confined(spec)
    if spec.problem.name != task.problem:
        raise StageFailed(f"the kernel computes {spec.problem.name}; the task is {task.problem}.",
                          f'Declare problem = "{task.problem}".')  # fmt: skip
    if missing := [d for d in task.dtypes if d not in spec.dtypes]:
        raise StageFailed(f"the kernel does not declare dtype {', '.join(missing)}, which the task needs.",
                          f"Declare dtypes = {list(task.dtypes)} and handle them.")  # fmt: skip
    firsts = []  # every shape is checked; one compile per dtype serves them all
    for dtype in task.dtypes:
        points = [_task_point(spec, task, i, shape, dtype) for i, shape in enumerate(task.shapes)]
        firsts.append(points[0])
    info = gpu.describe(0)
    backend = backends.for_spec(spec)
    assert isinstance(backend, DeviceBackend)  # a submission is a .cu or a Python function: it runs on the GPU
    for point in firsts:
        backend.compile(point, info)
    return info.arch


def _task_point(spec: Any, task: Task, index: int, shape: Shape, dtype: str) -> Any:
    """The kernel's point at a shape of the task; a hidden shape refused is not named."""
    from gemmlab.core.errors import ConstraintError
    from gemmlab.kernels import catalogue

    try:
        return catalogue.point(spec.id, shape, None, dtype, spec=spec)
    except ConstraintError as exc:
        if index < len(task.public):
            raise
        rule = task.hidden_rule
        raise StageFailed(
            f"the kernel refuses hidden shape {index - len(task.public) + 1} of the task.",
            f"Take any M, N, K that are multiples of {rule.multiple} from {rule.low} to {rule.high}"
            + (" (M = N = K)." if rule.square else "."),
        ) from exc


def compile_stage(submission: Submission, task: Task, worker: watchdog.Worker) -> None:
    if submission.kernel is None:
        raise StageFailed(f"{submission.folder} holds no kernel.", "Submit a declaration (.toml) or a Python file.")
    worker.call(f"{submission.name} (compile)", task.call_limit(), compile_on_device, str(submission.kernel), task)


def sanitize_stage(submission: Submission, task: Task, worker: watchdog.Worker) -> None:
    """memcheck, then racecheck, in the worker (it reads the kernel, which the
    calling process must not); each report's findings are the reason."""
    from gemmlab.measure import sanitize

    limit = task.sanitize_limit()
    for tool in SANITIZER_TOOLS:
        report = worker.call(f"{submission.name} ({tool})", 2 * limit, sanitize.check, [str(submission.kernel)],
                             tool, timeout=limit, jobs=2)  # fmt: skip
        if not report.clean:
            found = f"{report.errors} report(s)" if report.errors > 0 else sanitized_run_failure(report.output)
            raise StageFailed(
                f"compute-sanitizer {tool}: {found}:\n{report.findings(limit=20) or output_tail(report.output)}",
                f"Run `gemmlab check {submission.kernel} --tool {tool}` to see every finding.",
            )


def output_tail(output: str, lines: int = 15) -> str:
    """The last ``lines`` non-blank lines of a run's output: all there is to go
    on when it printed no finding and no error of its own."""
    kept = [line for line in output.splitlines() if line.strip()]
    return "\n".join(kept[-lines:]) if kept else "(it printed nothing)"


def sanitized_run_failure(output: str) -> str:
    """Why a run under the sanitizer failed with no finding of its own: the
    run checks C at each small shape, so a wrong answer stops it there."""
    if "VerificationError" in output:
        return "no hazard, but its results were wrong at the sanitizer's small shapes (each run checks C)"
    return "its run under the sanitizer failed"


def verify_stage(submission: Submission, task: Task, worker: watchdog.Worker) -> None:
    """The runner's checks at every hidden shape, fresh inputs each, no baseline, one timed launch."""
    from gemmlab.measure.run import run_declared

    for i, shape in enumerate(task.hidden, 1):
        for dtype in task.dtypes:
            label = f"{submission.name} at hidden shape {i} ({dtype})"
            try:
                if submission.is_python:
                    worker.call(label, apart_limit(task), apart.run_apart, str(submission.kernel), shape, dtype,
                                batches=0, launches=APART_LAUNCHES, limit_s=task.call_limit())  # fmt: skip
                else:
                    worker.call(label, task.call_limit(), run_declared, str(submission.kernel), None, shape, None,
                                dtype, reps=1, warmup=1, max_seconds=1.0, baseline=False)  # fmt: skip
            except GemmlabError as exc:
                raise masked(exc, shape, f"hidden shape {i}") from None


def masked(exc: GemmlabError, shape: Shape, name: str) -> GemmlabError:
    """``exc`` (of the same kind) with ``shape`` called ``name``: a hidden shape
    stays hidden in a reason the leaderboard shows."""
    sized = [f"{shape.m}x{shape.n}x{shape.k}", f"on {shape}"]

    def hide(text: str) -> str:
        for form in sized:
            text = text.replace(form, f"on {name}" if form.startswith("on ") else name)
        return text

    hidden = copy.copy(exc)
    hidden.cause, hidden.fix = hide(exc.cause), hide(exc.fix)
    hidden.args = (f"{hidden.cause} {hidden.fix}".strip(),)
    return hidden


# What a reason shown to students says instead of what it must not show.
HIDDEN_NUMBER, HIDDEN_PATH = "<hidden>", "<path>"
_PATH = re.compile(r"(?<![\w.])/(?:[^\s:'\"()\[\],;]+/?)+")


def scrubbed(text: str, task: Task, folder: Path | None) -> str:
    """``text`` (a reason a student will read: the CSV, the pages) with
    nothing in it that is hidden from students: each hidden shape, in the
    forms gemmlab writes a shape in, becomes "hidden shape i"; the hidden
    seed, and any side of a hidden shape that no public shape has, in any
    notation, becomes <hidden>; a path outside the submission's folder
    becomes <path>, and the folder itself <submission>. Compiler messages and
    a submission's own exceptions (which may have read the task's file) pass
    through here alike."""
    for i, shape in enumerate(task.hidden, 1):
        for form in (f"{shape.m}x{shape.n}x{shape.k}", f"{shape.m} x {shape.n} x {shape.k}",
                     f"({shape.m}, {shape.n}, {shape.k})", f"[{shape.m}, {shape.n}, {shape.k}]"):  # fmt: skip
            text = text.replace(form, f"hidden shape {i}")
    public = {d for s in task.public for d in (s.m, s.n, s.k)}
    secret = {d for s in task.hidden for d in (s.m, s.n, s.k)} - public
    numbers = sorted({str(task.hidden_rule.seed)} | {str(d) for d in secret}, key=len, reverse=True)
    if task.hidden and numbers:
        text = re.sub(rf"(?<![\w.])(?:{'|'.join(numbers)})(?![\w.])", HIDDEN_NUMBER, text)
    root = str(folder.resolve()) if folder is not None else None

    def path(match: re.Match) -> str:
        found = match.group(0)
        if root is not None and (found == root or found.startswith(root + "/")):
            return "<submission>" + found[len(root) :]
        return HIDDEN_PATH

    return _PATH.sub(path, text)


def time_stage(submission: Submission, task: Task, worker: watchdog.Worker) -> list[Any]:
    """Every shape of the task timed alternately with cuBLAS: RunResults with ratio_to_baseline."""
    from gemmlab.measure.run import run_declared

    results = []
    for shape, name in shape_names(task):
        for dtype in task.dtypes:
            label = f"{submission.name} at {name} ({dtype})"
            try:
                if submission.is_python:
                    result = worker.call(label, apart_limit(task), apart.run_apart, str(submission.kernel), shape,
                                         dtype, batches=task.reps, launches=APART_LAUNCHES,
                                         limit_s=task.call_limit())  # fmt: skip
                else:
                    result = worker.call(label, task.call_limit(), run_declared, str(submission.kernel), None,
                                         shape, None, dtype, reps=task.reps, max_seconds=task.max_seconds)  # fmt: skip
                results.append(result)
            except GemmlabError as exc:
                raise (masked(exc, shape, name) if shape in task.hidden else exc) from None
    return results


def profile_stage(submission: Submission, task: Task, worker: watchdog.Worker) -> dict:
    """The timed kernel profiled once at the task's profiled shape in its first
    dtype, in ``worker`` under the step's timeout: where it was profiled and the
    figures of PROFILE_FIGURES, or where and why there is no profile (``error``
    and ``fix``). It never raises a submission's error: a profile informs the
    page, not the grade."""
    shape, dtype = task.profiled_shape, task.dtypes[0]
    where = {"shape": [shape.m, shape.n, shape.k], "dtype": dtype}
    limit = task.call_limit()
    try:
        found = worker.call(f"{submission.name} (profile at {shape})", limit + PROFILE_MARGIN_S, profile_on_device,
                            str(submission.kernel), shape, dtype, limit)  # fmt: skip
    except GemmlabError as exc:  # no ncu, counters withheld, a fault or a hang under ncu
        return {**where, "error": scrubbed(exc.cause, task, submission.folder),
                "fix": scrubbed(exc.fix, task, submission.folder)}  # fmt: skip
    return {**where, **found}


def profile_on_device(reference: str, shape: Shape, dtype: str, timeout: float) -> dict:
    """In the worker: one verified launch of the kernel, at its default block
    edge as it was timed, under Nsight Compute (gemmlab.measure.ncu)."""
    from gemmlab.measure.ncu.command import profile_point

    found = profile_point(reference, shape, None, dtype, timeout=timeout)
    return {"kernel": found.kernel, "block_edge": found.block_edge, "device": found.device,
            "figures": {key: found.figures.get(key) for key in PROFILE_FIGURES}}  # fmt: skip


def apart_limit(task: Task) -> float:
    """The time a Python submission's shape may take in the grader's worker:
    importing it in a process of its own, then each of its calls' limits."""
    return apart.LOAD_LIMIT_S + 2 * task.call_limit()


def grade_one(submission: Submission, task: Task, profile: bool = False) -> Verdict:
    """:func:`staged`, with the wall time it took."""
    start = time.monotonic()
    verdict = staged(submission, task, profile)
    verdict.wall_s = time.monotonic() - start
    return verdict


def staged(submission: Submission, task: Task, profile: bool = False) -> Verdict:
    """Run the stages in order in a worker of the submission's own; stop at the
    first that fails. A GemmlabError of the submission's making is its verdict;
    one of the machine's (no GPU) and any bug are raised, and nothing is stored.
    With ``profile``, a submission that passed them all is then profiled."""
    verdict = Verdict(submission.name, str(submission.kernel or submission.folder), submission.source_hash, GRADED,
                      None)  # fmt: skip
    stages: tuple[tuple[str, Callable[..., Any]], ...] = (
        ("compile", compile_stage), ("sanitize", sanitize_stage), ("verify", verify_stage), ("time", time_stage),
    )  # fmt: skip
    results: Any = None
    # A Python submission is imported (to compile and sanitize it) in a worker
    # of its own, never in the one that then checks and times it at arm's length.
    # Both compile into their own memory only (nvrtc.PRIVATE_CACHE_ENV): no cubin
    # is read from a cache another submission could have written.
    with sandbox(submission) as own_environment, watchdog.Worker(PRIVATE) as worker, \
            watchdog.Worker(own_environment) as own:  # fmt: skip
        for name, stage in stages:
            runs_it = own if submission.is_python and name in ("compile", "sanitize") else worker
            try:
                # A Python submission's import can launch GPU work: its compile holds the GPU as the sanitizer does.
                with gpu_held("sanitize" if submission.is_python and name == "compile" else name):
                    results = stage(submission, task, runs_it)
            except NoGPUError:
                raise
            except GemmlabError as exc:
                verdict.stage = name
                verdict.reason = scrubbed(f"{name}: {failure_text(exc)}", task, submission.folder)
                return verdict
            finally:
                if runs_it is own:
                    # What the submission's code started in this stage ends with it (a worker that
                    # imports it again is started for the next stage that needs one).
                    own.close()
        if profile and results:
            # A Python submission is profiled where it was compiled: ncu's child
            # imports it, so never in the worker that checks and times it.
            with gpu_held("profile"):
                verdict.profile = profile_stage(submission, task, own if submission.is_python else worker)
    return scored(verdict, results or [], task)


def isolation_in_force() -> str:
    """What kept the submissions apart in this grading, in a sentence the leaderboard shows."""
    user = "root" if hasattr(os, "geteuid") and os.geteuid() == 0 else "the grader's own user"
    return (
        f"Isolation in force: each submission graded by workers of its own, running as {user} (no separate "
        "user, container or cgroup); an empty HOME and temporary folder for a Python submission's code, removed "
        "after it; compiles kept in each worker's memory, never read from a shared cache; sources confined to "
        "the submission's folder; its processes ended with each stage (group, session and descendants); "
        "verdicts signed by the grader; reasons scrubbed of hidden shapes and paths (docs/grading.md)."
    )


# What every grading worker is started with (see staged).
PRIVATE: dict[str, str | None] = {"GEMMLAB_PRIVATE_CACHE": "1"}


@contextlib.contextmanager
def sandbox(submission: Submission) -> Iterator[dict[str, str | None]]:
    """The environment of the worker that imports a Python submission: an
    empty folder made for it as its HOME, working folder, temporary folder
    and compile cache, none of the grader's GEMMLAB_ or DASK_ settings, the
    private compile cache; the folder is removed when the submission is done
    (its processes are gone by then: Worker.close ends them)."""
    home = tempfile.mkdtemp(prefix=f"gemmlab-grade-{submission.name}-")
    environment: dict[str, str | None] = {name: None for name in os.environ if name.startswith(("GEMMLAB_", "DASK_"))}
    environment.update(PRIVATE, HOME=home, TMPDIR=home, TMP=home, TEMP=home, GEMMLAB_CACHE=home)
    if os.environ.get("PYTHONPATH"):
        # The worker starts in ``home``: a relative entry (PYTHONPATH=src, run from a checkout) would
        # no longer find gemmlab in the processes it starts, the sanitizer's run among them.
        entries = os.environ["PYTHONPATH"].split(os.pathsep)
        environment["PYTHONPATH"] = os.pathsep.join(os.path.abspath(entry) for entry in entries if entry)
    try:
        yield environment
    finally:
        shutil.rmtree(home, ignore_errors=True)


def gpu_held(stage: str) -> contextlib.AbstractContextManager:
    """How ``stage`` holds the GPU against the cluster's other workers: timing
    and profiling alone, the sanitizer and verification beside each other,
    compiling not at all."""
    if stage in ("time", "profile"):
        return scale.gpu_to_itself()
    return scale.gpu_shared() if stage in ("sanitize", "verify") else contextlib.nullcontext()


def scored(verdict: Verdict, results: list[Any], task: Task) -> Verdict:
    """``verdict`` with each timed shape's share of cuBLAS, their geometric mean and the grade."""
    verdict.results = results
    verdict.shares = {f"{r.shape} {r.dtype}": r.ratio_to_baseline for r in results if r.ratio_to_baseline}
    if len(verdict.shares) < len(results):
        verdict.stage, verdict.reason = "time", "time: cuBLAS gave no time to compare with at some shape."
        return verdict
    if task.kernels == "own" and (library := library_kernels(results)):
        verdict.stage, verdict.shares = "time", {}
        verdict.reason = (
            f"time: the task asks for a kernel of your own, and the timed calls ran a library's GEMM: "
            f"{', '.join(library[:4])}. Write the product yourself (a library GEMM may not do the work)."
        )
        return verdict
    verdict.occupancy = next((o for o in map(occupancy_of, results) if o is not None), None)
    verdict.share_geomean = geomean(verdict.shares.values())
    verdict.grade = grade_of(verdict.share_geomean, task.thresholds)
    return verdict


def occupancy_of(result: Any) -> dict | None:
    """The theoretical occupancy of a timed result's launch on its GPU (registers,
    shared memory, block and what limits the blocks per SM); None where the
    launch is the function's own (a Python kernel) or the GPU is not known."""
    from gemmlab.core.arch import parse_cc
    from gemmlab.measure.occupancy import theoretical_occupancy

    # A stored device names its compute capability as text ("9.0"), a live one as a pair.
    registers, cc = result.resources.registers, result.device.get("cc")
    threads = math.prod(result.block)
    if registers is None or not cc or threads == 0:
        return None
    found = theoretical_occupancy(parse_cc(cc), threads, registers, result.resources.smem_bytes or 0,
                                  dynamic_smem=result.dynamic_smem)  # fmt: skip
    keep = ("threads_per_block", "regs_per_thread", "smem_requested", "active_blocks", "active_warps", "occupancy",
            "limiting_factors")  # fmt: skip
    return {"block": list(result.block), **{k: v for k, v in found.to_dict().items() if k in keep}}
