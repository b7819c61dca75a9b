"""A kernel from the user's own file: a ``.cu`` written as students write them,
with a short TOML declaration beside it (``matmul.toml`` next to ``matmul.cu``)
that says how to launch it. docs/user-kernels.md describes every key.

:func:`load` reads a declaration into a :class:`UserKernelSpec`, a
:class:`~gemmlab.kernels.spec.KernelSpec` like the catalogue's, so nothing
downstream asks where a kernel came from; :func:`load_path` reads whichever
file a command names (a Python kernel through :mod:`gemmlab.kernels.callables`),
and :func:`gemmlab.kernels.catalogue.get`, which every command calls with the
name or path it was given, remembers what it read. The ``.cu`` file is never
changed on disk: a ``#define`` parameter is set in the text handed to NVRTC,
by rewriting its ``#define`` line in place, so line numbers stay the user's.
A parameter the file does not name at all (a kernel that reads its block size
from ``blockDim``) is the declaration's own: it reaches only the expressions
that name it, the launch's grid and block most often, and never NVRTC.

:func:`load` reads a declaration in steps, each refusing what it finds wrong
before the next starts: the file, the problem, the source and its function,
the element types, the arguments, the parameters, the edge, the template
arguments, then the launch (grid, block, shared memory, accepted sizes).
The expressions are :mod:`gemmlab.kernels.declaration.expressions`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gemmlab.core.dtypes import DTYPE_ITEMSIZE
from gemmlab.core.errors import DeclarationError
from gemmlab.core.shapes import AXES, MAX_GRID_X, MAX_GRID_YZ, MAX_THREADS_PER_BLOCK, Dim3, Shape
from gemmlab.core.text import read_text
from gemmlab.kernels import callables
from gemmlab.kernels.declaration.base import (
    DOC,
    PROBLEMS,
    SIZE_NAMES,
    DeclaredSpec,
    Parameter,
    accepts_constraint,
    as_list,
    check_keys,
    parameter_values,
)
from gemmlab.kernels.declaration.expressions import FUNCTIONS, Expression, expression
from gemmlab.kernels.declaration.source import (
    GlobalFunction,
    define_pattern,
    find_function,
    line_naming,
    set_define,
    without_comments,
)
from gemmlab.kernels.spec import Constraint, KernelSpec, kernel_source
from gemmlab.problems.base import Problem
from gemmlab.problems.matmul import SCALARS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

# Element types a user's kernel may declare, with the C++ type "dtype" stands
# for in its template arguments. float16 and bfloat16 are cuda_fp16.h's and
# cuda_bf16.h's types, A, B and C all in them (unlike the tensor-core rungs'
# tag types of the same names, whose C is float32).
USER_CTYPES = {"float32": "float", "int32": "int", "float16": "__half", "bfloat16": "__nv_bfloat16"}
USER_DTYPES = tuple(USER_CTYPES)
# The C++ type alpha and beta are passed as (problems/matmul.py): float32 for
# every float type, as cuBLAS takes them with FP32 compute, and int for int32.
SCALAR_CTYPES = {"float32": "float", "float16": "float", "bfloat16": "float", "int32": "int"}
REQUIRED_KEYS = ("function", "problem", "dtypes", "arguments", "grid", "block")
OPTIONAL_KEYS = ("source", "summary", "template", "parameters", "edge", "dynamic_smem", "accepts")


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
                text = set_define(text, p.name, self.values(block_edge)[p.name])
        return text


def load(path: Path, fixed: Mapping[str, int] | None = None) -> UserKernelSpec:
    """The kernel declared by the TOML file ``path``; DeclarationError naming the
    file, the key and the fix for every mistake found in it. ``fixed``: parameters
    fixed at a value of their own (see :func:`variant`)."""
    path = Path(path)
    data = _read(path)

    def at(key: str) -> str:
        return f"{path}, {key}"

    check_keys(data, REQUIRED_KEYS, OPTIONAL_KEYS, path)
    problem, argument_names = _problem(data, at)
    source, text, function = _source(path, data, at)
    dtypes = _dtypes(data, at)
    arguments = _arguments(data, at, argument_names, source, function, dtypes)
    declared = _parameters(data, at, source, text, function)
    parameters = tuple(_fixed(declared, fixed or {}, path))
    edge = _edge(data, at, parameters)
    template = _template(data, at, function, parameters, dtypes)
    launch = _launch(data, at, arguments, parameters)
    _check_used(data, at, source, parameters, launch, template)
    _at_least_one("grid", launch.grid, tuple(declared), launch.sizes)
    _at_least_one("block", launch.block, tuple(declared), launch.sizes)
    return _spec(path, data, source, problem, dtypes, arguments, parameters, edge, template, launch)


def _read(path: Path) -> dict[str, Any]:
    """The declaration's TOML, or DeclarationError for a file that cannot be read or parsed."""
    try:
        return tomllib.loads(read_text(path, "kernel's declaration"))
    except OSError as exc:
        raise DeclarationError(
            f"cannot read the declaration {path}: {exc.strerror or exc}.", f"Check the path; {DOC} shows the format."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise DeclarationError(
            f"{path} is not valid TOML: {exc}.", f"Fix the syntax; {DOC} shows the format."
        ) from None


def _problem(data: Mapping[str, Any], at: Callable[[str], str]) -> tuple[Problem, tuple[str, ...]]:
    """The declared problem and the argument names its kernels may take."""
    problem_name = data["problem"]
    if problem_name not in PROBLEMS:
        raise DeclarationError(
            f"{at('problem')}: unknown problem {problem_name!r}.", f"Use one of {', '.join(PROBLEMS)}."
        )
    return PROBLEMS[problem_name]


def _source(path: Path, data: Mapping[str, Any], at: Callable[[str], str]) -> tuple[Path, str, GlobalFunction]:
    """The kernel's file (``source``, or the .cu of the declaration's stem), its text and its declared function."""
    source = path.parent / data.get("source", path.with_suffix(".cu").name)
    if not source.is_file():
        raise DeclarationError(
            f"{at('source')}: the kernel file {source} does not exist.",
            'Put the .cu beside the declaration, or name it with `source = "file.cu"` (relative to the declaration).',
        )
    text = kernel_source(source)
    function_name = data["function"]
    return source, text, find_function(text, function_name, at("function"))


def _dtypes(data: Mapping[str, Any], at: Callable[[str], str]) -> tuple[str, ...]:
    """The element types, each one a declared kernel may take."""
    dtypes = tuple(as_list(data["dtypes"], at("dtypes"), 'a list of element types such as ["float32"]'))
    for dtype in dtypes:
        if dtype not in USER_DTYPES:
            raise DeclarationError(
                f"{at('dtypes')}: {dtype!r} is not an element type a declared kernel may take yet.",
                f"Use {' or '.join(USER_DTYPES)}.",
            )
    return dtypes


def _arguments(
    data: Mapping[str, Any], at: Callable[[str], str], argument_names: tuple[str, ...], source: Path,
    function: GlobalFunction, dtypes: tuple[str, ...],
) -> tuple[str, ...]:  # fmt: skip
    """The names of the function's arguments, in order, checked against what the file declares."""
    function_name = data["function"]
    arguments = tuple(
        as_list(data["arguments"], at("arguments"), 'a list of argument names such as ["A", "B", "C", "n"]')
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
    return arguments


def _parameters(
    data: Mapping[str, Any], at: Callable[[str], str], source: Path, text: str, function: GlobalFunction
) -> list[Parameter]:
    """The declared parameters, each with its kind: a template parameter of the
    function, a ``#define`` of the file, or the declaration's own ("launch")."""
    function_name = data["function"]
    raw_params = data.get("parameters", {})
    if not isinstance(raw_params, dict):
        raise DeclarationError(
            f"{at('parameters')}: expected a table of name = [values].",
            "Write e.g. `[parameters]` then `TILE = [16, 8, 32]`.",
        )
    template_names = {n for kind, n in function.template if kind == "value"}
    code = without_comments(text)
    parameters = []
    for name, values in raw_params.items():
        where = at(f"parameters.{name}")
        if name in SIZE_NAMES or name in FUNCTIONS or name in ("dtype", "itemsize") or not name.isidentifier():
            raise DeclarationError(f"{where}: {name!r} cannot be a parameter's name.", "Use the name the file uses.")
        values = as_list(values, where, "a list of whole numbers, the default first")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise DeclarationError(
                f"{where}: {values} are not all positive whole numbers.", "List whole numbers, the default first."
            )
        if name in template_names:
            kind = "template"
        elif define_pattern(name).search(code):
            if define_pattern(name).search(code).group(2).rstrip().endswith("\\"):  # type: ignore[union-attr]
                raise DeclarationError(
                    f"{where}: the #define of {name} goes on over several lines.", "Write it on one line."
                )
            kind = "define"
        elif (line := line_naming(code, name)) is not None:
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
    return parameters


def _edge(data: Mapping[str, Any], at: Callable[[str], str], parameters: tuple[Parameter, ...]) -> str | None:
    """The parameter that is the block edge, if one is."""
    param_names = tuple(p.name for p in parameters)
    edge = data.get("edge")
    if edge is not None and edge not in param_names:
        raise DeclarationError(
            f"{at('edge')}: {edge!r} is not one of the parameters ({', '.join(param_names) or 'none declared'}).",
            "Name the parameter that is the block edge, or leave `edge` out.",
        )
    return edge


def _template(
    data: Mapping[str, Any], at: Callable[[str], str], function: GlobalFunction, parameters: tuple[Parameter, ...],
    dtypes: tuple[str, ...],
) -> tuple[str | Expression, ...]:  # fmt: skip
    """The template arguments: "dtype" or an expression of the parameters, one per template parameter."""
    function_name = data["function"]
    param_names = tuple(p.name for p in parameters)
    if function.template:
        written = data.get("template", [n if kind == "value" else "dtype" for kind, n in function.template])
        written = as_list(written, at("template"), "a list of template arguments", 0)
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
    return template


class _Launch(NamedTuple):
    """The declaration's launch: its expressions, and the size names they may read."""

    grid: list[Expression]
    block: list[Expression]
    dynamic: Expression | None  # dynamic shared memory in bytes
    accepts: list[Expression]
    sizes: tuple[str, ...]  # M, N, K, and n for a square-only kernel
    square: bool


def _launch(
    data: Mapping[str, Any], at: Callable[[str], str], arguments: tuple[str, ...], parameters: tuple[Parameter, ...]
) -> _Launch:
    """The grid, block, dynamic shared memory and accepted sizes, as expressions
    of the sizes and the parameters."""
    param_names = tuple(p.name for p in parameters)
    square = "n" in arguments
    sizes = ("M", "N", "K", *(("n",) if square else ()))
    names = (*sizes, *param_names)
    grid = [
        expression(e, at(f"grid[{i}]"), names)
        for i, e in enumerate(as_list(data["grid"], at("grid"), "1 to 3 expressions", 1, 3))
    ]
    block = [
        expression(e, at(f"block[{i}]"), names)
        for i, e in enumerate(as_list(data["block"], at("block"), "1 to 3 expressions", 1, 3))
    ]
    smem = data.get("dynamic_smem")
    dynamic = expression(smem, at("dynamic_smem"), (*names, "itemsize")) if smem is not None else None
    accepts = [
        expression(e, at(f"accepts[{i}]"), names, condition=True)
        for i, e in enumerate(as_list(data.get("accepts", []), at("accepts"), "a list of conditions", 0))
    ]
    return _Launch(grid, block, dynamic, accepts, sizes, square)


def _check_used(
    data: Mapping[str, Any], at: Callable[[str], str], source: Path, parameters: tuple[Parameter, ...],
    launch: _Launch, template: tuple[str | Expression, ...],
) -> None:  # fmt: skip
    """Refuse a parameter of the declaration's own ("launch") that no expression reads."""
    function_name = data["function"]
    grid, block, dynamic, accepts = launch.grid, launch.block, launch.dynamic, launch.accepts
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


def _spec(
    path: Path, data: Mapping[str, Any], source: Path, problem: Problem, dtypes: tuple[str, ...],
    arguments: tuple[str, ...], parameters: tuple[Parameter, ...], edge: str | None,
    template: tuple[str | Expression, ...], launch: _Launch,
) -> UserKernelSpec:  # fmt: skip
    """The UserKernelSpec the declaration makes: its geometry computed from the expressions at each launch."""
    function_name = data["function"]
    grid, block, dynamic, accepts, square = launch.grid, launch.block, launch.dynamic, launch.accepts, launch.square

    def env(shape: Shape, block_edge: int) -> dict[str, int]:
        sizes = {"M": shape.m, "N": shape.n, "K": shape.k}
        if square:
            sizes["n"] = shape.n
        return {**sizes, **parameter_values(parameters, edge, block_edge)}

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
        block_edges=next((p.values for p in parameters if p.name == edge), ()),
        grid=dim3(grid),
        block=dim3(block),
        constraints=(*(accepts_constraint(e, env) for e in accepts), _geometry_limits(dim3(grid), dim3(block))),
        dynamic_smem_bytes=dynamic_bytes if dynamic is not None else None,
        square_only=square,
        max_edge=MAX_THREADS_PER_BLOCK,
        problem=problem,
        templated_on_edge=False,
        arguments=arguments,
        declaration=path,
        cgma=None,  # gemmlab has no model of a user's kernel's global accesses
        parameters=parameters,
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
    arguments: tuple[str, ...], function: GlobalFunction, dtypes: tuple[str, ...], where: str, name: str
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


def load_path(path: Path) -> KernelSpec:
    """The user's kernel at ``path``: a declaration (``.toml``), a ``.cu`` file
    with a declaration of the same stem beside it, or a Python file declaring a
    function (:mod:`gemmlab.kernels.callables`)."""
    if path.suffix == ".py":
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
