"""`gemmlab grade`: a class's kernels checked and timed against one task.

A task (a TOML file, :func:`load_task`) names the problem, the element types,
the public shapes, a hidden set of shapes drawn from a secret seed, and the
grades as shares of the library (cuBLAS) on the grading GPU, so that a grade
means the same on any GPU.

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

The student's code runs only in child processes: the watchdog's worker
(:class:`gemmlab.measure.watchdog.Worker`, one per submission, so a fault or a
hang costs that submission only) and compute-sanitizer's own. The calling
process never imports a submission; it alone writes the results database.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import hmac
import json
import math
import os
import random
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # Python 3.11 and later; tomli (the same parser) before
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from gemmlab.core.dtypes import DTYPE_CTYPES
from gemmlab.core.errors import GemmlabError, NoGPUError, failure_text
from gemmlab.core.shapes import Shape
from gemmlab.measure import apart, watchdog
from gemmlab.results.store import GRADE_FIELDS
from gemmlab.studies import scale
from gemmlab.studies.scale import Outcome  # noqa: F401 (what the maps give, named here for callers)

# The stages in the order they run; a verdict that passed them all is "graded".
STAGES = ("compile", "sanitize", "verify", "time")
GRADED = "graded"
# The grade of a submission that failed a stage or reached no threshold.
FAIL = "fail"
# A grade whose bar is only to pass every check, whatever the speed.
VERIFIED = "verified"
PROBLEMS = ("matmul",)
SANITIZER_TOOLS = ("memcheck", "racecheck")
EXAMPLE = "examples/grading/task.toml"
TASK_KEYS = ("name", "problem", "dtypes", "shapes", "profile_shape", "hidden", "grades", "timing", "kernels")
# A task's `kernels`: "any" kernel may do the work, or the student's "own"
# (a library GEMM seen in the timed window fails the submission, named).
KERNEL_RULES = ("any", "own")
# Names of a library's GEMM kernels as CUPTI reports them: cuBLAS and
# cuBLASLt (their xmma and nvjet kernels, gemv, split-K reductions) and CUTLASS.
LIBRARY_GEMM = re.compile(r"cublas|cutlass|xmma|nvjet|gemv2?[NT]?_|gemmSN|splitKreduce|gemmk1", re.IGNORECASE)
HIDDEN_KEYS = ("count", "seed", "min", "max", "multiple", "square")
TIMING_KEYS = ("reps", "max_seconds", "timeout", "sanitize_timeout")
# A kernel under compute-sanitizer runs tens of times slower than alone, and a
# class graded on several workers starts several sanitizers at once; a step's
# timeout would fail correct kernels there (the class demo on an H100, 2026-11-24:
# four correct naive kernels ran over a 20 s timeout under memcheck). So the
# sanitize stage gets this many times the timeout, and at least SANITIZE_FLOOR_S;
# no more, since a submission that spins spends all of it (the faulty hang example).
SANITIZE_FACTOR = 4
SANITIZE_FLOOR_S = 60.0
# Launches per timed batch of a Python submission, each on inputs of its own (gemmlab.measure.apart).
APART_LAUNCHES = 4
# The figures of `gemmlab profile` (gemmlab.measure.profile.PROFILED, by key) a
# submission's profile keeps: what its page shows, the rest stays in ncu's output.
PROFILE_FIGURES = ("time_ms", "gflops", "achieved_occupancy", "theoretical_occupancy", "sm_throughput_pct",
                   "dram_throughput_pct", "dram_gbs", "arithmetic_intensity", "tensor_pipe_pct")  # fmt: skip
# ncu gets a step's timeout (Task.call_limit); the worker's call gets this much
# more, for reading the kernel before ncu starts, so that ncu's own limit, whose
# message says what to do, ends a slow profile first.
PROFILE_MARGIN_S = 30.0


class TaskError(GemmlabError):
    """A task file that gemmlab cannot follow."""


@dataclass(frozen=True)
class Hidden:
    """How the hidden shapes are drawn: ``count`` shapes from ``seed``, each side
    a multiple of ``multiple`` in [``low``, ``high``], all sides equal if ``square``."""

    count: int = 0
    seed: int = 0
    low: int = 64
    high: int = 1024
    multiple: int = 1
    square: bool = False


@dataclass(frozen=True)
class Task:
    name: str
    path: Path
    problem: str
    dtypes: tuple[str, ...]
    public: tuple[Shape, ...]
    hidden_rule: Hidden
    # (grade, least share of cuBLAS), best first; a share of None is VERIFIED.
    thresholds: tuple[tuple[str, float | None], ...]
    reps: int = 10
    max_seconds: float = 2.0
    timeout: float | None = None  # seconds one call may take; None: the watchdog's limit
    sanitize_timeout: float | None = None  # seconds one sanitizer run may take; None: see sanitize_limit
    profile_shape: Shape | None = None  # the shape --profile profiles at; None: the largest public shape
    kernels: str = "any"  # KERNEL_RULES: whether a library's GEMM may do the work

    @functools.cached_property
    def hidden(self) -> tuple[Shape, ...]:
        return hidden_shapes(self.hidden_rule, self.public)

    @property
    def shapes(self) -> tuple[Shape, ...]:
        return self.public + self.hidden

    @property
    def experiment(self) -> str:
        """What the task's per-shape results are stored under."""
        return f"grade:{self.name}"

    def call_limit(self) -> float:
        return self.timeout or watchdog.time_limit(0.0, 0, self.max_seconds)

    def sanitize_limit(self) -> float:
        return self.sanitize_timeout or max(SANITIZE_FACTOR * self.call_limit(), SANITIZE_FLOOR_S)

    @property
    def profiled_shape(self) -> Shape:
        """Where `--profile` profiles: the task's profile_shape, else its largest
        public shape by M·N·K, the first of equals (the one whose counters say
        most about the main loop)."""
        return self.profile_shape or max(self.public, key=lambda s: s.m * s.n * s.k)


# -- the task file --------------------------------------------------------------


def load_task(path: Path) -> Task:
    """The task in ``path``, every key checked; a TaskError names the key and the fix."""
    if not path.is_file():
        raise TaskError(f"task file {path} not found.", f"Give the path of a task TOML; {EXAMPLE} shows one.")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path} is not valid TOML: {exc}.", f"Compare it with {EXAMPLE}.") from None
    _known_keys(data, TASK_KEYS, str(path))
    problem = data.get("problem")
    if problem not in PROBLEMS:
        raise TaskError(f"{path}: problem = {problem!r} is not one gemmlab grades.", 'Write problem = "matmul".')
    public = tuple(_shape(s, path) for s in _list(data.get("shapes"), path, "shapes"))
    if len(set(public)) != len(public):
        raise TaskError(f"{path}: shapes lists a shape twice.", "List each public shape once.")
    return Task(
        name=_name(data.get("name", path.stem), path),
        path=path,
        problem=problem,
        dtypes=_dtypes(data.get("dtypes"), path),
        public=public,
        hidden_rule=_hidden(data.get("hidden", {}), path),
        thresholds=_thresholds(data.get("grades"), path),
        profile_shape=_profile_shape(data.get("profile_shape"), public, path),
        kernels=_kernel_rule(data.get("kernels", "any"), path),
        **_timing(data.get("timing", {}), path),
    )


def _known_keys(data: Any, known: Sequence[str], where: str) -> None:
    if not isinstance(data, dict):
        raise TaskError(f"{where} must be a table of keys.", f"Compare it with {EXAMPLE}.")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise TaskError(f"{where}: unknown key {', '.join(unknown)}.", f"The keys are {', '.join(known)}.")


def _name(value: Any, path: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{path}: name must be a non-empty string.", 'Write name = "matmul-f32", say.')
    return value.strip()


def _list(value: Any, path: Path, key: str) -> list:
    if not isinstance(value, list) or not value:
        raise TaskError(f"{path}: {key} must be a non-empty list.", f"See {key} in {EXAMPLE}.")
    return value


def _whole(value: Any, path: Path, key: str, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise TaskError(f"{path}: {key} = {value!r} is not a whole number of at least {least}.", f"Give {key} one.")
    return value


def _shape(value: Any, path: Path) -> Shape:
    """A square size N, or [M, N, K]."""
    if isinstance(value, list) and len(value) == 3:
        return Shape(*(_whole(v, path, "a side in shapes") for v in value))
    if isinstance(value, int) and not isinstance(value, bool):
        return Shape.square(_whole(value, path, "a size in shapes"))
    raise TaskError(f"{path}: {value!r} in shapes is not a shape.", "Write a square size (512) or [M, N, K].")


def _profile_shape(value: Any, public: tuple[Shape, ...], path: Path) -> Shape | None:
    """One of the public shapes, or None: a page names the shape it was profiled at."""
    if value is None:
        return None
    shape = _shape(value, path)
    if shape not in public:
        raise TaskError(f"{path}: profile_shape = {value!r} is not one of the public shapes.",
                        "Name a shape listed in shapes, or leave profile_shape out for the largest.")  # fmt: skip
    return shape


def _kernel_rule(value: Any, path: Path) -> str:
    if value not in KERNEL_RULES:
        raise TaskError(f"{path}: kernels = {value!r} is neither of {', '.join(map(repr, KERNEL_RULES))}.",
                        'Write kernels = "own" (no library GEMM may do the work) or kernels = "any".')  # fmt: skip
    return value


def library_kernels(results: Iterable[Any]) -> list[str]:
    """The library GEMM kernels (LIBRARY_GEMM) among what the timed calls of
    ``results`` ran, each once."""
    seen = [name for r in results for name in getattr(r, "kernels_seen", []) or []]
    return list(dict.fromkeys(name for name in seen if LIBRARY_GEMM.search(name)))


def _dtypes(value: Any, path: Path) -> tuple[str, ...]:
    dtypes = _list(value, path, "dtypes")
    bad = [d for d in dtypes if d not in DTYPE_CTYPES]
    if bad:
        raise TaskError(f"{path}: unknown dtype {', '.join(map(repr, bad))}.", 'Write dtypes = ["float32"], say.')
    return tuple(dtypes)


def _hidden(value: Any, path: Path) -> Hidden:
    where = f"{path} [hidden]"
    _known_keys(value, HIDDEN_KEYS, where)
    count = _whole(value.get("count", 0), path, "hidden.count", least=0)
    if count and "seed" not in value:
        raise TaskError(f"{where}: count = {count} needs a seed.", "Add seed = <a whole number you keep secret>.")
    seed = _whole(value.get("seed", 0), path, "hidden.seed", least=0)
    rule = Hidden(
        count=count,
        seed=seed,
        low=_whole(value.get("min", Hidden.low), path, "hidden.min"),
        high=_whole(value.get("max", Hidden.high), path, "hidden.max"),
        multiple=_whole(value.get("multiple", Hidden.multiple), path, "hidden.multiple"),
        square=bool(value.get("square", False)),
    )
    if count and not _sides(rule):
        raise TaskError(
            f"{where}: no multiple of {rule.multiple} lies between min = {rule.low} and max = {rule.high}.",
            "Widen min and max, or lower multiple.",
        )
    return rule


def _thresholds(value: Any, path: Path) -> tuple[tuple[str, float | None], ...]:
    """The grades, best first: each a least share of cuBLAS (0 < share), or
    "verified" for the grade of any submission that passes every check."""
    if not isinstance(value, dict) or not value:
        raise TaskError(f"{path}: [grades] is missing or empty.", "Add [grades] with A = 0.5, say (shares of cuBLAS).")
    out: list[tuple[str, float | None]] = []
    for name, bar in value.items():
        if bar == VERIFIED:
            out.append((name, None))
        elif isinstance(bar, int | float) and not isinstance(bar, bool) and 0 < bar:
            out.append((name, float(bar)))
        else:
            raise TaskError(
                f'{path}: grades.{name} = {bar!r} is neither a share of cuBLAS above 0 nor "{VERIFIED}".',
                f'Write {name} = 0.25 (a quarter of cuBLAS\'s speed), or {name} = "{VERIFIED}".',
            )
    if name := next((n for n in value if n == FAIL), None):
        raise TaskError(f"{path}: grades.{name}: {FAIL!r} is the grade of what passes no bar.", "Rename it.")
    return tuple(sorted(out, key=lambda item: -1.0 if item[1] is None else item[1], reverse=True))


def _timing(value: Any, path: Path) -> dict:
    _known_keys(value, TIMING_KEYS, f"{path} [timing]")
    out: dict[str, Any] = {}
    if "reps" in value:
        out["reps"] = _whole(value["reps"], path, "timing.reps")
    for key in ("max_seconds", "timeout", "sanitize_timeout"):
        if key in value:
            seconds = value[key]
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
                raise TaskError(f"{path}: timing.{key} = {seconds!r} is not a positive number of seconds.",
                                f"Give timing.{key} as 2.0, say.")  # fmt: skip
            out[key] = float(seconds)
    return out


# -- hidden shapes, shares, grades ---------------------------------------------


def _sides(rule: Hidden) -> range:
    """The side lengths a hidden shape may have."""
    return range(rule.multiple * math.ceil(rule.low / rule.multiple), rule.high + 1, rule.multiple)


def hidden_shapes(rule: Hidden, public: Sequence[Shape] = ()) -> tuple[Shape, ...]:
    """``rule.count`` shapes drawn from ``rule.seed`` alone (the same on every
    machine and run), none of them a public shape nor drawn twice; fewer only
    when the bounds hold fewer."""
    sides = _sides(rule)
    rng = random.Random(rule.seed)
    drawn: list[Shape] = []
    for _ in range(100 * rule.count):  # enough tries unless the bounds hold hardly more shapes than asked
        if len(drawn) == rule.count:
            break
        shape = Shape.square(rng.choice(sides)) if rule.square else Shape(*(rng.choice(sides) for _ in range(3)))
        if shape not in drawn and shape not in public:
            drawn.append(shape)
    return tuple(drawn)


def geomean(values: Iterable[float]) -> float | None:
    """The geometric mean of positive ``values``; None when there are none. The
    mean of ratios that treats a 2x gain on one shape and a 2x loss on another as even."""
    values = list(values)
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError(f"a geometric mean takes positive values, not {min(values)}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def grade_of(share: float | None, thresholds: Sequence[tuple[str, float | None]]) -> str:
    """The best grade whose bar ``share`` reaches (None: the submission was not
    timed, so only a "verified" bar can be reached); :data:`FAIL` otherwise."""
    for name, bar in thresholds:
        if bar is None or (share is not None and share >= bar):
            return name
    return FAIL


# -- submissions ----------------------------------------------------------------

KERNEL_SUFFIXES = (".toml", ".py")


@dataclass(frozen=True)
class Submission:
    """One student's kernel: ``kernel`` is the file gemmlab reads (a declaration
    or a Python file); None when the folder holds none (it fails to compile)."""

    name: str
    folder: Path
    kernel: Path | None
    files: tuple[Path, ...]

    @property
    def is_python(self) -> bool:
        """A Python callable: imported only by a process that neither times nor checks it."""
        return self.kernel is not None and self.kernel.suffix == ".py"

    @functools.cached_property
    def source_hash(self) -> str:
        """What a resubmission changes: the bytes of the submission's files."""
        digest = hashlib.sha256()
        for path in self.files:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()[:16]


def find_submissions(paths: Sequence[Path]) -> list[Submission]:
    """The submissions in ``paths``: a kernel file (a .cu finds its .toml), a
    folder that holds one, or a folder of such folders (one per student)."""
    found: list[Submission] = []
    for path in paths:
        if not path.exists():
            raise GemmlabError(f"{path} not found.", "Give submission files or folders that exist.")
        if path.is_file():
            found.append(_file_submission(path))
        elif _kernel_files(path):
            found.append(_folder_submission(path))
        else:
            found += [_folder_submission(sub) for sub in sorted(path.iterdir()) if _is_student(sub)]
    if not found:
        raise GemmlabError(
            f"no submission found in {', '.join(map(str, paths))}.",
            "Give a kernel file, a folder with one, or a folder of such folders (one per student).",
        )
    names = [s.name for s in found]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise GemmlabError(
            f"two submissions are both called {', '.join(twice)}.",
            "A submission is called by its folder's name: give each student a folder of their own.",
        )
    return found


def _is_student(path: Path) -> bool:
    return path.is_dir() and not path.name.startswith((".", "_"))


def _files(folder: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts))


def _kernel_files(folder: Path) -> list[Path]:
    tomls = sorted(folder.glob("*.toml"))
    return tomls or sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def _folder_submission(folder: Path) -> Submission:
    kernels = _kernel_files(folder)
    if len(kernels) > 1:
        raise GemmlabError(f"{folder} holds more than one kernel: {', '.join(p.name for p in kernels)}.",
                           "Leave one declaration (.toml) or one Python file in each submission's folder.")  # fmt: skip
    return Submission(folder.name, folder.resolve(), kernels[0].resolve() if kernels else None, _files(folder))


def _file_submission(path: Path) -> Submission:
    kernel = path.with_suffix(".toml") if path.suffix == ".cu" else path
    if kernel.suffix not in KERNEL_SUFFIXES or not kernel.is_file():
        raise GemmlabError(f"{path} is not a kernel gemmlab can grade.",
                           "Give a declaration (.toml, or the .cu beside it) or a Python file.")  # fmt: skip
    # Every file of the folder: whatever the kernel includes lies in it (kernels/spec.py refuses the rest),
    # so a change to any file it compiles is a new attempt.
    return Submission(path.resolve().parent.name, path.resolve().parent, kernel.resolve(), _files(path.parent))


# -- the stages -----------------------------------------------------------------


class StageFailed(GemmlabError):
    """A submission that fails a stage for a reason of its own making."""


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
    for point in firsts:
        backends.for_spec(spec).compile(point, info)
    return info.arch


def confined(spec: Any) -> None:
    """StageFailed when a submission's declaration names a kernel file outside
    its own folder (issue 49: a folder holding only a declaration with
    ``source = "../ctl_cu_tiled/matmul.cu"`` was graded as a classmate's
    kernel). Its includes are confined by the kernel loader (kernels/spec.py)."""
    if spec.declaration is None:
        return
    folder, source = Path(spec.declaration).resolve().parent, Path(spec.source).resolve()
    if not source.is_relative_to(folder):
        raise StageFailed(
            f"the declaration names the kernel file {source}, outside the submission's folder {folder}.",
            'Submit your own kernel: keep its files in your folder and name it there (source = "matmul.cu").',
        )


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
    edge as it was timed, under Nsight Compute (gemmlab.measure.profile)."""
    from gemmlab.measure.profile import profile_point

    found = profile_point(reference, shape, None, dtype, timeout=timeout)
    return {"kernel": found.kernel, "block_edge": found.block_edge, "device": found.device,
            "figures": {key: found.figures.get(key) for key in PROFILE_FIGURES}}  # fmt: skip


def hidden_names(task: Task) -> dict[tuple[int, int, int], str]:
    """What a page calls each hidden shape, by (m, n, k): its number, never its sizes."""
    return {(s.m, s.n, s.k): name for s, name in shape_names(task) if s in task.hidden}


def apart_limit(task: Task) -> float:
    """The time a Python submission's shape may take in the grader's worker:
    importing it in a process of its own, then each of its calls' limits."""
    return apart.LOAD_LIMIT_S + 2 * task.call_limit()


def shape_names(task: Task) -> list[tuple[Shape, str]]:
    """Each shape of the task with what a reason calls it: a hidden one by its number only."""
    return [(s, str(s)) for s in task.public] + [(s, f"hidden shape {i}") for i, s in enumerate(task.hidden, 1)]


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
PRIVATE = {"GEMMLAB_PRIVATE_CACHE": "1"}


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


# -- many submissions -----------------------------------------------------------


MapFn = Callable[..., Iterator[tuple[Any, Any]]]


def inline_map(fn: Callable[[Any], Any], items: Iterable[Any], *, key: Callable[[Any], str] = str) -> Iterator:
    """``fn`` on each item in this process, in order: the map with nothing to start."""
    return scale.Pool(scheduler=scale.INLINE).map(fn, items, key=key)


@contextlib.contextmanager
def pooled(scheduler: str | None = None) -> Iterator[Any]:
    """A scale.Pool over the local GPUs, or the Dask cluster at ``scheduler``:
    its ``map`` grades, its ``describe`` says where. Without Dask installed and
    with no scheduler named, one submission after another in this process; a
    scheduler named without Dask is the pool's error, which names the extra."""
    if scheduler is None and not scale.dask_installed():
        scheduler = scale.INLINE
    with scale.Pool(scheduler=scheduler) as pool:
        yield pool


# -- the grader's signature --------------------------------------------------------

# The stage and grade shown for a grades row the grader did not write as it is
# (see trusted): named on that row, never blamed on another submission.
TAMPERED = "isolation"
# Where the grader keeps the key it signs verdicts with (default
# ~/.config/gemmlab/grader.key, made on first use, readable by its owner only).
KEY_VARIABLE = "GEMMLAB_GRADER_KEY"


def key_path() -> Path:
    if os.environ.get(KEY_VARIABLE):
        return Path(os.environ[KEY_VARIABLE])
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "gemmlab" / "grader.key"


def grader_key() -> bytes:
    """The grader's signing key, made (32 random bytes, mode 0600) if there is none."""
    path = key_path()
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another grading process made it meanwhile
            pass
        else:
            with os.fdopen(handle, "wb") as out:
                out.write(secrets.token_bytes(32))
    return path.read_bytes()


def signature(row: dict, key: bytes) -> str:
    """The HMAC-SHA256 of a grades row's fields (all but the signature itself)."""
    fields = {name: row.get(name) for name in GRADE_FIELDS if name != "signature"}
    return hmac.new(key, json.dumps(fields, sort_keys=True, default=str).encode(), hashlib.sha256).hexdigest()


def trusted(row: dict, key: bytes, signed_from: int) -> bool | None:
    """Whether the grader wrote ``row`` as it is: True (its signature holds),
    False (changed or forged: another process wrote it), None (it predates
    signatures, schema v14: nothing can be said)."""
    if row["id"] < signed_from:
        return None
    return hmac.compare_digest(str(row.get("signature") or ""), signature(row, key))


@dataclass
class GradeSummary:
    graded: list[Verdict] = field(default_factory=list)
    skipped: list[Submission] = field(default_factory=list)  # graded before, unchanged
    errors: list[tuple[Submission, str]] = field(default_factory=list)  # not graded: nothing stored
    # Submissions being graded when another process wrote the database (whoever it was: with
    # several workers it cannot be told); the board shows only rows the grader signed.
    written_meanwhile: list[str] = field(default_factory=list)


def to_grade(submissions: Sequence[Submission], task: Task, store: Any, *, force: bool = False) -> list[Submission]:
    """The submissions not graded before in their present form (all with ``force``)."""
    if force:
        return list(submissions)
    key, since = grader_key(), store.grades_signed_from()
    # A row the grader did not write (a forged verdict for a source not yet graded) grades nothing.
    done = {(row["submission"], row["source_hash"]) for row in store.grades(task.name)
            if trusted(row, key, since) is not False}  # fmt: skip
    return [s for s in submissions if (s.name, s.source_hash) not in done]


def grade(
    submissions: Sequence[Submission], task: Task, store: Any, *, map_fn: MapFn = inline_map, force: bool = False,
    run_record: dict | None = None, on_verdict: Callable[[Verdict], None] | None = None, profile: bool = False,
) -> GradeSummary:  # fmt: skip
    """Grade ``submissions`` through ``map_fn`` and store each verdict (a new
    attempt, with its profile where ``profile``) and its timed results here, as
    each comes back, so that a run stopped halfway keeps what it graded."""
    summary = GradeSummary()
    pending = to_grade(submissions, task, store, force=force)
    summary.skipped = [s for s in submissions if s not in pending]
    run_id: int | None = None
    seen = store.data_version()
    key = grader_key()
    one = functools.partial(grade_one, task=task, profile=profile)
    for submission, outcome in map_fn(one, pending, key=lambda s: s.name):
        if outcome.error is not None:
            summary.errors.append((submission, outcome.error))
            continue
        verdict: Verdict = outcome.value
        if (now := store.data_version()) != seen:
            seen = now
            summary.written_meanwhile.append(submission.name)
        if run_id is None:
            run_id = store.start_run(run_record or {})
        if verdict.results:
            store.add_results(run_id, task.experiment, verdict.results)
        store.add_grade(run_id, verdict.row(task), sign=lambda row: signature(row, key))
        summary.graded.append(verdict)
        if on_verdict is not None:
            on_verdict(verdict)
    return summary
