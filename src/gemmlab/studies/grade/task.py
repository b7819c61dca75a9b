"""A grading task: its TOML file read and checked key by key (:func:`load_task`), the hidden
shapes drawn from its secret seed, and the grade a share of cuBLAS reaches."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # Python 3.11 and later; tomli (the same parser) before
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from gemmlab.core.dtypes import DTYPE_CTYPES
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.measure import watchdog

# The grade of a submission that failed a stage or reached no threshold.
FAIL = "fail"
# A grade whose bar is only to pass every check, whatever the speed.
VERIFIED = "verified"
PROBLEMS = ("matmul",)
EXAMPLE = "examples/grading/task.toml"
TASK_KEYS = ("name", "problem", "dtypes", "shapes", "profile_shape", "hidden", "grades", "timing", "kernels")
# A task's `kernels`: "any" kernel may do the work, or the student's "own"
# (a library GEMM seen in the timed window fails the submission, named).
KERNEL_RULES = ("any", "own")
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


def hidden_names(task: Task) -> dict[tuple[int, int, int], str]:
    """What a page calls each hidden shape, by (m, n, k): its number, never its sizes."""
    return {(s.m, s.n, s.k): name for s, name in shape_names(task) if s in task.hidden}


def shape_names(task: Task) -> list[tuple[Shape, str]]:
    """Each shape of the task with what a reason calls it: a hidden one by its number only."""
    return [(s, str(s)) for s in task.public] + [(s, f"hidden shape {i}") for i, s in enumerate(task.hidden, 1)]
