"""What the two tunable ladders (gemmlab.sgemm, gemmlab.tensor) share: a
configuration is a dict of template parameters, checked against a rung's
rules, and the rules are sentences, one per requirement broken."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from gemmlab.core.errors import ConstraintError, UnknownName
from gemmlab.core.shapes import MAX_GRID_YZ, Shape
from gemmlab.kernels.spec import Constraint

Config = dict[str, int]


class Tunable(Protocol):
    """A rung of either ladder: its parameters, its default, its rules."""

    params: tuple[str, ...]

    def config(self, values: tuple[int, ...] | None = None) -> Config: ...

    def violations(self, c: Config) -> list[str]: ...


R = TypeVar("R", bound=Tunable)


def find_rung(rungs: Mapping[str, R], kernel_id: str, ladder: str) -> R:
    """The rung named ``kernel_id``; UnknownName listing the ladder's kernels otherwise."""
    try:
        return rungs[kernel_id]
    except KeyError:
        raise UnknownName(
            f"'{kernel_id}' is not a kernel of the {ladder}.", f"The ladder's kernels: {', '.join(rungs)}."
        ) from None


def search_configs(rung: Tunable, candidates: Iterable[tuple[int, ...]]) -> list[Config]:
    """The rung's default, then each candidate configuration that is new and breaks no rule."""
    found = [rung.config()]
    for values in candidates:
        c = rung.config(values)
        if c not in found and not rung.violations(c):
            found.append(c)
    return found


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def needs(condition: bool, message: str) -> list[str]:
    """[] when ``condition`` holds, else the requirement it breaks, in words."""
    return [] if condition else [message]


def grid_rows_fit(rows: int) -> Constraint:
    """gridDim.y (blocks of ``rows`` rows along M) may not exceed 65535."""

    def check(shape: Shape, block_edge: int) -> str | None:
        blocks = cdiv(shape.m, rows)
        if blocks > MAX_GRID_YZ:
            return f"M = {shape.m} needs {blocks} blocks of {rows} rows in grid y, over the limit of {MAX_GRID_YZ}"
        return None

    return Constraint(f"at most {MAX_GRID_YZ} blocks of {rows} rows along M", check)


def grid_y_fits(grid: Callable[[Shape, int], tuple[int, int, int]]) -> Constraint:
    """gridDim.y of ``grid`` (a kernel's grid for a shape and block edge) may not exceed 65535."""

    def check(shape: Shape, block_edge: int) -> str | None:
        rows = grid(shape, block_edge)[1]
        if rows > MAX_GRID_YZ:
            return (
                f"M = {shape.m}, N = {shape.n} needs {rows} rows of blocks in grid y, over the limit of {MAX_GRID_YZ}"
            )
        return None

    return Constraint(f"at most {MAX_GRID_YZ} rows of blocks in grid y", check)


def checked_config(kernel_id: str, rung: Tunable, config: Config) -> Config:
    """``config`` over the rung's defaults. UnknownName for a parameter the
    rung lacks; ConstraintError naming every rule the result breaks."""
    unknown = set(config) - set(rung.params)
    if unknown:
        raise UnknownName(
            f"{kernel_id} has no parameter {', '.join(sorted(unknown))}.", f"Its parameters: {', '.join(rung.params)}."
        )
    c = {**rung.config(), **config}
    problems = rung.violations(c)
    if problems:
        raise ConstraintError(
            f"{kernel_id} cannot take {c}: {'; '.join(problems)}.",
            f"configs('{kernel_id}') lists the configurations it takes.",
        )
    return c
