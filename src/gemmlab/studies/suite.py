"""The shape suite (gemmlab/studies/shapes.toml): the shapes the dispatcher is
tuned and judged on, in groups (squares, odd sizes, skinny M and N, K-heavy,
small K, tall and thin), each with its repetitions, and the quick subset that
tunes in a few minutes on one GPU. Pure: read and checked without a GPU."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape

try:  # Python 3.11 and later; tomli (the same parser) before
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

# Package data beside this module, so that `gemmlab dispatch tune` works from a plain install.
SUITE_PATH = Path(__file__).resolve().with_name("shapes.toml")
SUBSETS = ("quick", "full")
# The element types the suite may name: the FP32 ladder's and the tensor-core ladder's two C types.
SUITE_DTYPES = ("float32", "bfloat16", "bfloat16-out", "e4m3", "e4m3-bf16")
# What people type for them.
DTYPE_ALIASES = {
    "fp32": "float32",
    "bf16": "bfloat16",
    "bf16-out": "bfloat16-out",
    "fp8": "e4m3",
    "fp8-bf16": "e4m3-bf16",
}


@dataclass(frozen=True)
class SuiteShape:
    shape: Shape
    group: str
    reps: int


@dataclass(frozen=True)
class Suite:
    name: str  # "quick" or "full"
    shapes: tuple[SuiteShape, ...]
    dtypes: tuple[str, ...]

    def reps(self, shape: Shape, default: int = 20) -> int:
        """The repetitions the suite gives ``shape`` (``default`` for a shape outside it)."""
        return next((s.reps for s in self.shapes if s.shape == shape), default)


def dtype_name(dtype: str) -> str:
    """``dtype`` as gemmlab names it (fp32 -> float32, bf16 -> bfloat16); GemmlabError for one the suite lacks."""
    name = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    if name not in SUITE_DTYPES:
        raise GemmlabError(
            f"The dispatcher has no element type '{dtype}'.",
            f"Use one of {', '.join(SUITE_DTYPES)} (or fp32, bf16, bf16-out, fp8, fp8-bf16).",
        )
    return name


def load_suite(subset: str = "quick", path: str | Path | None = None) -> Suite:
    """The ``subset`` ("quick" or "full") of the suite at ``path`` (default:
    the repository's gemmlab/studies/shapes.toml). A shape listed in two groups is
    kept once, with the first group's repetitions."""
    if subset not in SUBSETS:
        raise GemmlabError(f"There is no '{subset}' suite.", f"Use --suite {' or --suite '.join(SUBSETS)}.")
    path = Path(path) if path is not None else SUITE_PATH
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise GemmlabError(
            f"The shape suite {path} does not exist.",
            "Give --suite-file the path of a shapes.toml, or reinstall gemmlab: its own suite is package data.",
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise GemmlabError(f"{path} is not valid TOML: {exc}.", "Correct the file (see its comments).") from None
    dtypes = tuple(data.get("dtypes", SUITE_DTYPES))
    for dtype in dtypes:
        dtype_name(dtype)
    found: dict[Shape, SuiteShape] = {}
    for group in data.get("group", []):
        for entry in _group_shapes(group, subset, path):
            found.setdefault(entry.shape, entry)
    if not found:
        raise GemmlabError(f"The {subset} suite of {path} has no shapes.", "Add [[group]] entries with shapes.")
    return Suite(subset, tuple(found.values()), dtypes)


def _group_shapes(group: dict, subset: str, path: Path) -> list[SuiteShape]:
    name = group.get("name", "?")
    reps = int(group.get("reps", 20))
    listed = [_shape(s, name, path) for s in group.get("shapes", [])]
    listed += [Shape.square(int(n)) for n in group.get("squares", [])]
    if subset == "quick":
        quick = [_shape(s, name, path) for s in group.get("quick", [])]
        stray = [str(s) for s in quick if s not in listed]
        if stray:
            raise GemmlabError(
                f"Group '{name}' of {path} names quick shapes it does not list: {', '.join(stray)}.",
                "Add them to the group's shapes (or squares), or remove them from quick.",
            )
        listed = quick
    return [SuiteShape(s, name, reps) for s in listed]


def _shape(value: object, group: str, path: Path) -> Shape:
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) and v > 0 for v in value)):
        raise GemmlabError(
            f"Group '{group}' of {path} has the shape {value!r}; a shape is [M, N, K] of positive integers.",
            "Write it as [M, N, K], e.g. [16, 4096, 4096].",
        )
    return Shape(*value)
