"""A kernel from the user's own file: a ``.cu`` written as students write them,
with a short TOML declaration beside it (``matmul.toml`` next to ``matmul.cu``)
that says how to launch it. docs/user-kernels.md describes every key.

:func:`load` reads a declaration into a :class:`UserKernelSpec`, a
:class:`~gemmlab.kernels.spec.KernelSpec` like the catalogue's, so nothing
downstream asks where a kernel came from; :func:`resolve` is what every
command calls with the name or path it was given. The ``.cu`` file is never
changed on disk: a ``#define`` parameter is set in the text handed to NVRTC,
by rewriting its ``#define`` line in place, so line numbers stay the user's.
A parameter the file does not name at all (a kernel that reads its block size
from ``blockDim``) is the declaration's own: it reaches only the expressions
that name it, the launch's grid and block most often, and never NVRTC.

The declaration's expressions (grid, block, shared memory, accepted sizes,
template arguments) are read by a small evaluator over Python's ``ast``:
numbers, names, ``+ - * // %``, comparisons, ``and``/``or``/``not``, and the
functions ``cdiv``, ``min`` and ``max``. Anything else is refused when the
declaration is read, naming the file, the key and the expression.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gemmlab.core.dtypes import DTYPE_ITEMSIZE
from gemmlab.core.errors import DeclarationError
from gemmlab.core.shapes import AXES, MAX_GRID_X, MAX_GRID_YZ, MAX_THREADS_PER_BLOCK, Dim3, Shape
from gemmlab.core.text import read_text
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import Constraint, KernelSpec, kernel_source
from gemmlab.problems.matmul import MATMUL, MATMUL_ARGUMENT_NAMES, SCALARS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DOC = "docs/user-kernels.md"
# The problems a declaration may name, with the argument names their kernels may take.
PROBLEMS = {"matmul": (MATMUL, MATMUL_ARGUMENT_NAMES)}
# Element types a user's kernel may declare, with the C++ type "dtype" stands
# for in its template arguments. float16 and bfloat16 are cuda_fp16.h's and
# cuda_bf16.h's types, A, B and C all in them (unlike the tensor-core rungs'
# tag types of the same names, whose C is float32).
USER_CTYPES = {"float32": "float", "int32": "int", "float16": "__half", "bfloat16": "__nv_bfloat16"}
USER_DTYPES = tuple(USER_CTYPES)
# The C++ type alpha and beta are passed as (problems/matmul.py): float32 for
# every float type, as cuBLAS takes them with FP32 compute, and int for int32.
SCALAR_CTYPES = {"float32": "float", "float16": "float", "bfloat16": "float", "int32": "int"}
SIZE_NAMES = ("M", "N", "K", "n")
FUNCTIONS: dict[str, Callable[..., int]] = {
    "cdiv": lambda a, b: -(-a // b),
    "min": min,
    "max": max,
}
ARITY = {"cdiv": (2, 2), "min": (2, 8), "max": (2, 8)}
REQUIRED_KEYS = ("function", "problem", "dtypes", "arguments", "grid", "block")
OPTIONAL_KEYS = ("source", "summary", "template", "parameters", "edge", "dynamic_smem", "accepts")

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
        return _values(self.parameters, self.edge, block_edge)

    def default_block_edge(self) -> int:
        """The edge parameter's first value, as every parameter's first value is its
        default (the catalogue's kernels take their largest edge instead: KernelSpec)."""
        return self.block_edges[0] if self.block_edges else 0

    @property
    def config(self) -> dict[str, int] | None:
        fixed = {p.name: p.values[0] for p in self.parameters if p.name != self.edge}
        return fixed or None


@dataclass(frozen=True)
class UserKernelSpec(DeclaredSpec):
    """A KernelSpec read from a user's declaration. Its instantiation differs
    from the catalogue's (whose template arguments are the dtype, the block edge
    and fixed extras): the template arguments are the declaration's expressions
    and ``#define`` parameters are set in the compiled text."""

    template: tuple[str | Expression, ...] = ()  # "dtype" or an expression of the parameters

    def template_args(self, dtype: str, block_edge: int) -> str:
        env = self.values(block_edge)
        return ", ".join(USER_CTYPES[dtype] if arg == "dtype" else str(arg(env)) for arg in self.template)  # type: ignore[operator]

    def name_expression(self, dtype: str, block_edge: int) -> str:
        return f"{self.function}<{self.template_args(dtype, block_edge)}>" if self.template else self.function

    def source_text(self, block_edge: int = 0) -> str:
        text = kernel_source(self.source)
        for p in self.parameters:
            if p.kind == "define":
                text = _set_define(text, p.name, self.values(block_edge)[p.name])
        return text


def _define_pattern(name: str) -> re.Pattern:
    # An object-like macro only: `#define TILE 16`, not `#define TILE(x) ...`.
    return re.compile(rf"^([ \t]*#[ \t]*define[ \t]+{re.escape(name)})(?![\w(])(.*)$", re.MULTILINE)


def _set_define(text: str, name: str, value: int) -> str:
    """``text`` with every ``#define name ...`` line saying ``value``; one line
    for one line, so NVRTC's line numbers stay those of the user's file."""
    return _define_pattern(name).sub(lambda m: f"{m.group(1)} {value}", text)


def _without_comments(text: str) -> str:
    """``text`` with comments blanked (their newlines kept), to look for declarations in."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.DOTALL)


@dataclass(frozen=True)
class _Function:
    """What the file says about the declared ``__global__`` function."""

    template: tuple[tuple[str, str], ...]  # (kind, name): kind "type" or "value"
    parameters: tuple[str, ...]  # each parameter's declaration text


def _find_function(text: str, name: str, where: str) -> _Function:
    code = _without_comments(text)
    found = {}
    for match in re.finditer(r"__global__\b", code):
        paren = code.find("(", match.end())
        head = code[match.end() : paren]
        ident = re.findall(r"\w+", head)
        if ident:
            found[ident[-1]] = (match.start(), paren)
    if name not in found:
        listed = ", ".join(found) or "none"
        raise DeclarationError(
            f"{where}: the file has no __global__ function '{name}' (its __global__ functions: {listed}).",
            "Set `function` to the name of the kernel in the file.",
        )
    start, paren = found[name]
    template: tuple[tuple[str, str], ...] = ()
    before = re.search(r"template\s*<([^<>]*)>\s*$", code[:start])
    if before:
        params = []
        for part in filter(None, (p.strip() for p in before.group(1).split(","))):
            declared = part.split("=")[0].split()
            kind = "type" if declared[0] in ("typename", "class") else "value"
            params.append((kind, declared[-1]))
        template = tuple(params)
    depth, end = 0, paren
    for end in range(paren, len(code)):
        depth += {"(": 1, ")": -1}.get(code[end], 0)
        if depth == 0:
            break
    inside = code[paren + 1 : end].strip()
    parameters = tuple(p.strip() for p in _top_level_split(inside)) if inside and inside != "void" else ()
    return _Function(template, parameters)


def _top_level_split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def _list(value: Any, where: str, what: str, lo: int = 1, hi: int = 99) -> list:
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


def load(path: Path, fixed: Mapping[str, int] | None = None) -> UserKernelSpec:
    """The kernel declared by the TOML file ``path``; DeclarationError naming the
    file, the key and the fix for every mistake found in it. ``fixed``: parameters
    fixed at a value of their own (see :func:`variant`)."""
    path = Path(path)
    try:
        data = tomllib.loads(read_text(path, "kernel's declaration"))
    except OSError as exc:
        raise DeclarationError(
            f"cannot read the declaration {path}: {exc.strerror or exc}.", f"Check the path; {DOC} shows the format."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise DeclarationError(
            f"{path} is not valid TOML: {exc}.", f"Fix the syntax; {DOC} shows the format."
        ) from None

    def at(key: str) -> str:
        return f"{path}, {key}"

    check_keys(data, REQUIRED_KEYS, OPTIONAL_KEYS, path)

    problem_name = data["problem"]
    if problem_name not in PROBLEMS:
        raise DeclarationError(
            f"{at('problem')}: unknown problem {problem_name!r}.", f"Use one of {', '.join(PROBLEMS)}."
        )
    problem, argument_names = PROBLEMS[problem_name]

    source = path.parent / data.get("source", path.with_suffix(".cu").name)
    if not source.is_file():
        raise DeclarationError(
            f"{at('source')}: the kernel file {source} does not exist.",
            'Put the .cu beside the declaration, or name it with `source = "file.cu"` (relative to the declaration).',
        )
    text = kernel_source(source)
    function_name = data["function"]
    function = _find_function(text, function_name, at("function"))

    dtypes = tuple(_list(data["dtypes"], at("dtypes"), 'a list of element types such as ["float32"]'))
    for dtype in dtypes:
        if dtype not in USER_DTYPES:
            raise DeclarationError(
                f"{at('dtypes')}: {dtype!r} is not an element type a declared kernel may take yet.",
                f"Use {' or '.join(USER_DTYPES)}.",
            )

    arguments = tuple(
        _list(data["arguments"], at("arguments"), 'a list of argument names such as ["A", "B", "C", "n"]')
    )
    for arg in arguments:
        if arg not in argument_names:
            raise DeclarationError(
                f"{at('arguments')}: unknown argument name {arg!r}.",
                f"Name each of the function's arguments, in order, with one of {', '.join(argument_names)}.",
            )
    if len(set(arguments)) != len(arguments) or not {"A", "B", "C"} <= set(arguments):
        raise DeclarationError(
            f"{at('arguments')}: {list(arguments)} must name A, B and C once each, and each size at most once.",
            'Write the function\'s arguments in order, e.g. ["A", "B", "C", "n"] or ["A", "B", "C", "M", "N", "K"].',
        )
    if "n" in arguments and {"M", "N", "K"} & set(arguments):
        raise DeclarationError(
            f"{at('arguments')}: n (the square size) and M, N, K cannot be taken together.",
            "Take n for a square-only kernel, or M, N and K for any shape.",
        )
    if len(function.parameters) != len(arguments):
        raise DeclarationError(
            f"{at('arguments')}: {len(arguments)} names, but {function_name} in {source} takes "
            f"{len(function.parameters)} arguments ({', '.join(function.parameters) or 'none'}).",
            "Name every argument of the function, in order.",
        )
    _check_scalars(arguments, function, dtypes, at("arguments"), function_name)
    for arg, decl in zip(arguments, function.parameters, strict=True):
        if (arg in ("A", "B", "C")) != ("*" in decl):
            kind = "a pointer" if arg in ("A", "B", "C") else "an integer"
            raise DeclarationError(
                f"{at('arguments')}: {arg} should be {kind}, but {function_name}'s argument is `{decl}`.",
                "Check the order of the names against the function's arguments.",
            )

    raw_params = data.get("parameters", {})
    if not isinstance(raw_params, dict):
        raise DeclarationError(
            f"{at('parameters')}: expected a table of name = [values].",
            "Write e.g. `[parameters]` then `TILE = [16, 8, 32]`.",
        )
    template_names = {n for kind, n in function.template if kind == "value"}
    code = _without_comments(text)
    parameters = []
    for name, values in raw_params.items():
        where = at(f"parameters.{name}")
        if name in SIZE_NAMES or name in FUNCTIONS or name in ("dtype", "itemsize") or not name.isidentifier():
            raise DeclarationError(f"{where}: {name!r} cannot be a parameter's name.", "Use the name the file uses.")
        values = _list(values, where, "a list of whole numbers, the default first")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise DeclarationError(
                f"{where}: {values} are not all positive whole numbers.", "List whole numbers, the default first."
            )
        if name in template_names:
            kind = "template"
        elif _define_pattern(name).search(code):
            if _define_pattern(name).search(code).group(2).rstrip().endswith("\\"):  # type: ignore[union-attr]
                raise DeclarationError(
                    f"{where}: the #define of {name} goes on over several lines.", "Write it on one line."
                )
            kind = "define"
        elif (line := _line_naming(code, name)) is not None:
            # The file holds a value of its own under this name (`const int BS = 16;`):
            # a launch sized by the declaration's value would not match it.
            raise DeclarationError(
                f"{where}: {source} names {name} (`{line}`) but not in a #define or as a template parameter of "
                f"{function_name}, so gemmlab cannot set it, and a launch sized by another value would not match it.",
                f"If the kernel reads its block size from blockDim, give the parameter a name the file does not use; "
                f"if it relies on {name}, write it as `#define {name} ...` or a template parameter.",
            )
        else:
            kind = "launch"  # the declaration's own: only its expressions read it (checked below)
        parameters.append(Parameter(name, kind, tuple(values)))
    param_names = tuple(p.name for p in parameters)
    declared_parameters = tuple(parameters)
    parameters = _fixed(parameters, fixed or {}, path)

    edge = data.get("edge")
    if edge is not None and edge not in param_names:
        raise DeclarationError(
            f"{at('edge')}: {edge!r} is not one of the parameters ({', '.join(param_names) or 'none declared'}).",
            "Name the parameter that is the block edge, or leave `edge` out.",
        )

    if function.template:
        written = data.get("template", [n if kind == "value" else "dtype" for kind, n in function.template])
        written = _list(written, at("template"), "a list of template arguments", 0)
        if len(written) != len(function.template):
            raise DeclarationError(
                f"{at('template')}: {len(written)} template arguments for {function_name}, which takes "
                f"{len(function.template)}.",
                'One argument per template parameter: "dtype" for the element type, or an expression of parameters.',
            )
        template = tuple(
            "dtype" if arg == "dtype" else expression(arg, at(f"template[{i}]"), param_names)
            for i, arg in enumerate(written)
        )
    elif "template" in data:
        raise DeclarationError(f"{at('template')}: {function_name} is not a template.", "Leave `template` out.")
    else:
        template = ()
    if len(dtypes) > 1 and "dtype" not in template:
        raise DeclarationError(
            f"{at('dtypes')}: {len(dtypes)} element types, but {function_name} is not templated on its element type.",
            "Declare one element type, or make the function a template on it (`template <typename T>`).",
        )
    for p in parameters:
        if p.kind == "template" and not any(isinstance(arg, Expression) and p.name in arg.names for arg in template):
            raise DeclarationError(
                f"{at(f'parameters.{p.name}')}: {p.name} is a template parameter that no template argument uses.",
                "Use it in `template`, or leave `template` out to pass the parameters in the function's order.",
            )

    square = "n" in arguments
    sizes = ("M", "N", "K", *(("n",) if square else ()))
    names = (*sizes, *param_names)
    grid = [
        expression(e, at(f"grid[{i}]"), names)
        for i, e in enumerate(_list(data["grid"], at("grid"), "1 to 3 expressions", 1, 3))
    ]
    block = [
        expression(e, at(f"block[{i}]"), names)
        for i, e in enumerate(_list(data["block"], at("block"), "1 to 3 expressions", 1, 3))
    ]
    smem = data.get("dynamic_smem")
    dynamic = expression(smem, at("dynamic_smem"), (*names, "itemsize")) if smem is not None else None
    accepts = [
        expression(e, at(f"accepts[{i}]"), names, condition=True)
        for i, e in enumerate(_list(data.get("accepts", []), at("accepts"), "a list of conditions", 0))
    ]
    read = {
        name
        for e in (*grid, *block, *accepts, *([dynamic] if dynamic else []), *template)
        if isinstance(e, Expression)
        for name in e.names
    }
    for p in parameters:
        if p.kind == "launch" and p.name not in read:
            raise DeclarationError(
                f"{at(f'parameters.{p.name}')}: {p.name} is used nowhere: it is neither a #define in {source} nor a "
                f"template parameter of {function_name}, and no expression of the declaration (grid, block, "
                "dynamic_smem, accepts, template) names it.",
                f"For a block size the kernel reads from blockDim, size the launch with it: block = "
                f'["{p.name}", "{p.name}"], grid = ["cdiv(N, {p.name})", "cdiv(M, {p.name})"]. Otherwise spell it as '
                "the file spells its #define or template parameter, or remove it.",
            )
    _at_least_one("grid", grid, declared_parameters, sizes)
    _at_least_one("block", block, declared_parameters, sizes)
    parameters_t = tuple(parameters)

    def env(shape: Shape, block_edge: int) -> dict[str, int]:
        sizes = {"M": shape.m, "N": shape.n, "K": shape.k}
        if square:
            sizes["n"] = shape.n
        return {**sizes, **_values(parameters_t, edge, block_edge)}

    def dim3(exprs: list[Expression]) -> Callable[[Shape, int], Dim3]:
        def geometry(shape: Shape, block_edge: int) -> Dim3:
            values = [e(env(shape, block_edge)) for e in exprs]
            return tuple(values + [1] * (3 - len(values)))  # type: ignore[return-value]

        return geometry

    def dynamic_bytes(shape: Shape, block_edge: int, dtype: str) -> int:
        return dynamic({**env(shape, block_edge), "itemsize": DTYPE_ITEMSIZE[dtype]})  # type: ignore[misc]

    return UserKernelSpec(
        # The folder and the stem: the same wherever the command runs from, and
        # never a catalogue id (those have no slash).
        id=f"{path.resolve().parent.name}/{path.stem}",
        source=source,
        function=function_name,
        source_doc=f"your kernel ({path})",
        summary=str(data.get("summary", f"{function_name} from {source.name}")),
        dtypes=dtypes,
        block_edges=next((p.values for p in parameters_t if p.name == edge), ()),
        grid=dim3(grid),
        block=dim3(block),
        constraints=(*(_accepts(e, env) for e in accepts), _geometry_limits(dim3(grid), dim3(block))),
        dynamic_smem_bytes=dynamic_bytes if dynamic is not None else None,
        square_only=square,
        max_edge=MAX_THREADS_PER_BLOCK,
        problem=problem,
        templated_on_edge=False,
        arguments=arguments,
        declaration=path,
        cgma=None,  # gemmlab has no model of a user's kernel's global accesses
        parameters=parameters_t,
        edge=edge,
        template=template,
    )


def _fixed(parameters: list[Parameter], values: Mapping[str, int], path: Path) -> list[Parameter]:
    """``parameters`` with those named in ``values`` fixed at that one value (any
    positive whole number, declared or not: a sweep may try values beyond the list)."""
    names = {p.name for p in parameters}
    unknown = sorted(set(values) - names)
    if unknown:
        raise DeclarationError(
            f"{path} declares no parameter {', '.join(unknown)} "
            f"(its parameters: {', '.join(sorted(names)) or 'none'}).",
            "Name a parameter listed under [parameters] in the declaration.",
        )
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DeclarationError(
                f"{path}: {name} = {value!r} is not a positive whole number.", f"Give {name} a value such as 16."
            )
    return [Parameter(p.name, p.kind, (values[p.name],)) if p.name in values else p for p in parameters]


def variant(spec: KernelSpec, values: Mapping[str, int]) -> UserKernelSpec:
    """The user's kernel ``spec`` with the parameters in ``values`` fixed: the same
    id, a configuration (and, for the edge, block edge) of its own. It is read
    from the declaration again, so its geometry, accepted sizes and compiled text
    all see the values; it is not remembered by the catalogue, which keeps the
    declared kernel."""
    if not isinstance(spec, UserKernelSpec) or spec.declaration is None:
        raise DeclarationError(
            f"{spec.id} declares no parameters to set.",
            f"Parameters belong to a user's kernel declared in a TOML file ({DOC}).",
        )
    return load(spec.declaration, fixed=values)


def all_values(spec: KernelSpec) -> dict[str, int]:
    """Every declared parameter's value (the edge's included: its default edge), by name."""
    if not isinstance(spec, UserKernelSpec):
        return {}
    return spec.values(spec.default_block_edge())


def _check_scalars(
    arguments: tuple[str, ...], function: _Function, dtypes: tuple[str, ...], where: str, name: str
) -> None:
    """alpha and beta come together, and are declared in the type gemmlab passes them as."""
    taken = [s for s in SCALARS if s in arguments]
    if len(taken) == 1:
        raise DeclarationError(
            f"{where}: {taken[0]} without {({*SCALARS} - {*taken}).pop()}.",
            "Take both alpha and beta (C = alpha*A*B + beta*C), or neither (C = A*B).",
        )
    ctypes = {SCALAR_CTYPES[d] for d in dtypes}
    for arg, decl in zip(arguments, function.parameters, strict=False):
        if arg not in SCALARS:
            continue
        if len(ctypes) > 1:
            raise DeclarationError(
                f"{where}: {arg} would be a float for some of the dtypes and an int for others.",
                "Declare float types only, or int32 only, for a kernel that takes alpha and beta.",
            )
        ctype = next(iter(ctypes))
        if "*" in decl or ctype not in re.findall(r"\w+", decl)[:-1]:
            raise DeclarationError(
                f"{where}: gemmlab passes {arg} as {'an' if ctype == 'int' else 'a'} {ctype}, but {name}'s "
                f"argument is `{decl}`.",
                f"Declare it `{ctype} {arg}` (float32 scalars for every float type, as cuBLAS takes them; {DOC}).",
            )


def _values(parameters: tuple[Parameter, ...], edge: str | None, block_edge: int) -> dict[str, int]:
    """Every parameter's value at ``block_edge``: the edge's, the others' defaults."""
    return {p.name: block_edge if p.name == edge else p.values[0] for p in parameters}


def _accepts(condition: Expression, env: Callable[[Shape, int], dict[str, int]]) -> Constraint:
    def violation(shape: Shape, block_edge: int) -> str | None:
        values = env(shape, block_edge)
        if condition(values):
            return None
        named = ", ".join(f"{k} = {v}" for k, v in values.items())
        return f"the declaration accepts only `{condition.text}`, false for {named}"

    return Constraint(condition.text, violation)


def _line_naming(code: str, name: str) -> str | None:
    """The first line of ``code`` (comments blanked) that names ``name`` outside a
    string literal and a ``#line`` directive, stripped; None when none does."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    for line in code.splitlines():
        if not re.match(r"\s*#\s*line\b", line) and word.search(re.sub(r'"(?:\\.|[^"\\])*"', '""', line)):
            return line.strip()
    return None


def _at_least_one(key: str, exprs: list[Expression], parameters: tuple[Parameter, ...], sizes: tuple[str, ...]) -> None:
    """DeclarationError naming a dimension of the ``key`` ("grid" or "block") that
    is below 1 at a declared value of a parameter, the others at their first (what
    `compile` and `--block` launch). A dimension that depends on the sizes, or a
    value given from outside (a sweep's, a tuner's), is checked at each launch
    instead (:func:`_geometry_limits`)."""
    unit = {"grid": "block", "block": "thread"}[key]
    first = {p.name: p.values[0] for p in parameters}
    settings = [first, *({**first, p.name: v} for p in parameters for v in p.values[1:])]
    for axis, e in zip(AXES, exprs, strict=False):
        if e.names & set(sizes):
            continue
        for env in settings:
            value = e(env)
            if value >= 1:
                continue
            named = ", ".join(f"{n} = {env[n]}" for n in sorted(e.names & set(env)))
            raise DeclarationError(
                f"{e.where}: `{e.text}` gives {value} {unit}s in {axis}{f' at {named}' if named else ''}; "
                "a launch needs at least 1 in each dimension.",
                f"Leave out the value that gives {value}, or write the dimension so that it is at least 1 "
                f"(`max(1, {e.text})`)."
                if named
                else f"Write 1 for a dimension of a single {unit}: `{key} = [16, 1]` is 16 x 1 {unit}s.",
            )


def _geometry_limits(grid: Callable[[Shape, int], Dim3], block: Callable[[Shape, int], Dim3]) -> Constraint:
    """What every launch must respect whatever the declaration says: at least one
    thread and block, at most 1024 threads per block, the grid's limits."""

    def violation(shape: Shape, block_edge: int) -> str | None:
        g, b = grid(shape, block_edge), block(shape, block_edge)
        for what, dims, unit in (("grid", g, "blocks"), ("block", b, "threads")):
            empty = [f"{v} {unit} in {axis}" for axis, v in zip(AXES, dims, strict=True) if v < 1]
            if empty:
                return f"the declared {what} {dims} has {' and '.join(empty)}; each dimension needs at least 1"
        threads = b[0] * b[1] * b[2]
        if threads > MAX_THREADS_PER_BLOCK:
            return f"the declared block {b} has {threads} threads, over the {MAX_THREADS_PER_BLOCK} a block may have"
        if g[0] > MAX_GRID_X or max(g[1], g[2]) > MAX_GRID_YZ:
            return f"the declared grid {g} is over the limits ({MAX_GRID_X} in x, {MAX_GRID_YZ} in y and z)"
        return None

    return Constraint(f"at most {MAX_THREADS_PER_BLOCK} threads per block, grid within the limits", violation)


def is_declared(name: str) -> bool:
    """Whether a command's kernel argument is a path to a user's kernel rather than a catalogue id."""
    return catalogue.is_file_name(name)


def resolve(name_or_path: str) -> KernelSpec:
    """What a command's kernel argument names: a catalogue id, a user's kernel
    by its path (see :func:`load_path`) or by the id it was declared under
    earlier in this process (:func:`gemmlab.kernels.catalogue.get`)."""
    return catalogue.get(name_or_path)


def load_path(path: Path) -> KernelSpec:
    """The user's kernel at ``path``: a declaration (``.toml``), a ``.cu`` file
    with a declaration of the same stem beside it, or a Python file declaring a
    function (:mod:`gemmlab.kernels.callables`)."""
    if path.suffix == ".py":
        from gemmlab.kernels import callables

        return callables.load(path)
    if path.suffix == ".cu":
        declaration = path.with_suffix(".toml")
        if not declaration.is_file():
            raise DeclarationError(
                f"{path} has no declaration beside it ({declaration} does not exist).",
                f"Write {declaration} saying how to launch the kernel; {DOC} shows the format.",
            )
        path = declaration
    return load(path)
