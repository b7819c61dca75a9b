"""What every user's declaration has, whichever file holds it: its keys
checked, its lists read, its parameters (one of which may be the block edge)
and the KernelSpec they make, and its accepted sizes as constraints."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gemmlab.core.errors import DeclarationError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.declaration.expressions import Expression
from gemmlab.kernels.spec import Constraint, KernelSpec
from gemmlab.problems.matmul import MATMUL, MATMUL_ARGUMENT_NAMES

DOC = "docs/user-kernels.md"
# The problems a declaration may name, with the argument names their kernels may take.
PROBLEMS = {"matmul": (MATMUL, MATMUL_ARGUMENT_NAMES)}
SIZE_NAMES = ("M", "N", "K", "n")


@dataclass(frozen=True)
class Parameter:
    """A value the kernel is declared with: a ``#define`` in its file, a template
    parameter, or a name of the declaration alone ("launch": one the file never
    names, which sizes the launch, a kernel reading its block size from
    ``blockDim``, and is not given to NVRTC)."""

    name: str
    kind: str  # "define", "template" or "launch" (a Python function's: "keyword")
    values: tuple[int, ...]  # the first is the default


@dataclass(frozen=True)
class DeclaredSpec(KernelSpec):
    """What every user's kernel has beside a KernelSpec: the declared
    parameters, one of which may be the block edge."""

    parameters: tuple[Parameter, ...] = ()
    edge: str | None = None  # the parameter that is the block edge

    def values(self, block_edge: int) -> dict[str, int]:
        """Every parameter's value at ``block_edge``: the edge's, the others' defaults."""
        return parameter_values(self.parameters, self.edge, block_edge)

    def default_block_edge(self) -> int:
        """The edge parameter's first value, as every parameter's first value is its
        default (the catalogue's kernels take their largest edge instead: KernelSpec)."""
        return self.block_edges[0] if self.block_edges else 0

    @property
    def config(self) -> dict[str, int] | None:
        fixed = {p.name: p.values[0] for p in self.parameters if p.name != self.edge}
        return fixed or None


def as_list(value: Any, where: str, what: str, lo: int = 1, hi: int = 99) -> list:
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not lo <= len(value) <= hi:
        raise DeclarationError(f"{where}: expected {what}.", f"See {DOC} for an example.")
    return value


def check_keys(
    data: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...], path: Path, holder: str = ""
) -> None:
    """Refuse a declaration with a key gemmlab does not know, or without a
    required one; ``holder`` says where the keys sit in the file (" in GEMMLAB")."""
    unknown = sorted(map(str, set(data) - {*required, *optional}))
    if unknown:
        raise DeclarationError(
            f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}{holder}.",
            f"The keys{holder} are {', '.join((*required, *optional))} ({DOC}).",
        )
    missing = [k for k in required if k not in data]
    if missing:
        raise DeclarationError(
            f"{path}: missing {', '.join(missing)}{holder}.",
            f"Add {'them' if len(missing) > 1 else 'it'}; {DOC} shows an example.",
        )


def parameter_values(parameters: tuple[Parameter, ...], edge: str | None, block_edge: int) -> dict[str, int]:
    """Every parameter's value at ``block_edge``: the edge's, the others' defaults."""
    return {p.name: block_edge if p.name == edge else p.values[0] for p in parameters}


def accepts_constraint(condition: Expression, env: Callable[[Shape, int], dict[str, int]]) -> Constraint:
    def violation(shape: Shape, block_edge: int) -> str | None:
        values = env(shape, block_edge)
        if condition(values):
            return None
        named = ", ".join(f"{k} = {v}" for k, v in values.items())
        return f"the declaration accepts only `{condition.text}`, false for {named}"

    return Constraint(condition.text, violation)
