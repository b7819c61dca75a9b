"""The declaration's expressions (grid, block, shared memory, accepted sizes,
template arguments), read by a small evaluator over Python's ``ast``:
numbers, names, ``+ - * // %``, comparisons, ``and``/``or``/``not``, and the
functions ``cdiv``, ``min`` and ``max``. Anything else is refused when the
declaration is read, naming the file, the key and the expression.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gemmlab.core.errors import DeclarationError

FUNCTIONS: dict[str, Callable[..., int]] = {
    "cdiv": lambda a, b: -(-a // b),
    "min": min,
    "max": max,
}
ARITY = {"cdiv": (2, 2), "min": (2, 8), "max": (2, 8)}

_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
# How a declaration spells each operator above: the messages list them from
# here, so a hint never leaves out one the evaluator takes.
_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
}  # fmt: skip
# C spellings a student writes in a condition, and what a declaration says instead.
_C_SPELLINGS = (
    (re.compile(r"(?<![=!<>])=(?![=<>])"), "`==` to compare, not `=`"),
    (re.compile(r"&&"), "`and`, not `&&`"),
    (re.compile(r"\|\|"), "`or`, not `||`"),
    (re.compile(r"!(?!=)"), "`not`, not `!`"),
)


def allowed(*, condition: bool) -> str:
    """What an expression may use, in words; ``condition``: an accepted-sizes test."""
    arithmetic = " ".join(_SYMBOLS[op] for op in _BINARY)
    text = f"numbers, names, {arithmetic}, cdiv(a, b), min(...), max(...)"
    if condition:
        text += f", comparisons ({' '.join(_SYMBOLS[op] for op in _COMPARE)}), and, or, not"
    return text


@dataclass(frozen=True)
class Expression:
    """One of the declaration's small expressions, checked when read and
    evaluated over a mapping of names to integers."""

    text: str
    where: str  # "FILE, key": named in every error about it
    tree: ast.expr

    @property
    def names(self) -> frozenset[str]:
        """The names the expression reads."""
        return frozenset(n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name))

    def __call__(self, env: Mapping[str, int]) -> int:
        try:
            return int(_evaluate(self.tree, env))
        except ZeroDivisionError:
            values = ", ".join(f"{k} = {v}" for k, v in env.items())
            raise DeclarationError(
                f"{self.where}: `{self.text}` divides by zero with {values}.",
                "Change the expression or the parameter values so that no divisor is zero.",
            ) from None


def expression(text: Any, where: str, names: tuple[str, ...], *, condition: bool = False) -> Expression:
    """``text`` checked as an expression over ``names``; ``condition``: a test
    (comparisons, and/or/not allowed) rather than a number."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise DeclarationError(
            f"{where}: {text!r} is not an expression.", 'Write it as a string such as "cdiv(N, TILE)" or a number.'
        )
    source = str(text)
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except SyntaxError:
        spelt = [hint for pattern, hint in _C_SPELLINGS if pattern.search(source)] if condition else []
        raise DeclarationError(
            f"{where}: `{source}` is not an expression gemmlab can read.",
            (f"Write {'; '.join(spelt)}. " if spelt else "") + f"Use only {allowed(condition=condition)}.",
        ) from None
    _check(tree, source, where, names, condition)
    return Expression(source, where, tree)


def _check(node: ast.AST, text: str, where: str, names: tuple[str, ...], condition: bool) -> None:
    def refuse(what: str) -> DeclarationError:
        return DeclarationError(
            f"{where}: `{text}` uses {what}, which a declaration may not.", f"Use only {allowed(condition=condition)}."
        )

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise refuse(f"the constant {node.value!r} (only whole numbers are allowed)")
    elif isinstance(node, ast.Name):
        if node.id not in names:
            raise DeclarationError(
                f"{where}: `{text}` names '{node.id}', which is not known here.",
                f"Names allowed here: {', '.join(names)}"
                + (" (declare a parameter under [parameters])." if names else "."),
            )
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            hint = " ('/': use // for whole-number division)" if isinstance(node.op, ast.Div) else ""
            raise refuse(f"the operator {type(node.op).__name__}{hint}")
        _check(node.left, text, where, names, False)
        _check(node.right, text, where, names, False)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        _check(node.operand, text, where, names, False)
    elif isinstance(node, ast.Call):
        func = node.func.id if isinstance(node.func, ast.Name) else None
        if func not in FUNCTIONS or node.keywords:
            raise refuse(f"the call {ast.unparse(node.func)}(...)")
        low, high = ARITY[func]
        if not low <= len(node.args) <= high:
            raise refuse(f"{func}() with {len(node.args)} arguments")
        for arg in node.args:
            _check(arg, text, where, names, False)
    elif condition and isinstance(node, ast.Compare):
        if not all(type(op) in _COMPARE for op in node.ops):
            raise refuse(f"a comparison other than {' '.join(_SYMBOLS[op] for op in _COMPARE)}")
        for part in (node.left, *node.comparators):
            _check(part, text, where, names, False)
    elif condition and isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, text, where, names, True)
    elif condition and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _check(node.operand, text, where, names, True)
    else:
        raise refuse(f"`{ast.unparse(node)}`")


def _evaluate(node: ast.expr, env: Mapping[str, int]) -> Any:
    """The value of a node :func:`_check` accepted."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else (not value if isinstance(node.op, ast.Not) else value)
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id](*(_evaluate(a, env) for a in node.args))  # type: ignore[union-attr]
    if isinstance(node, ast.Compare):
        values = [_evaluate(node.left, env), *(_evaluate(c, env) for c in node.comparators)]
        return all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, values, values[1:], strict=False))
    if isinstance(node, ast.BoolOp):
        results = (_evaluate(v, env) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    raise AssertionError(f"unchecked node {ast.dump(node)}")
