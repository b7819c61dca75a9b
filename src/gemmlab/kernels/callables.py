"""A kernel as a Python function: a Triton kernel with its launch wrapper, a
PyTorch or CuPy expression, a Numba CUDA kernel. The user's ``.py`` file
defines the function and, beside it, a module-level dict ``GEMMLAB`` that
declares it with the keys of the TOML declaration that still mean something
for a function (docs/user-kernels.md describes them)::

    GEMMLAB = {
        "function": "matmul",          # called as matmul(A, B, C, **parameters)
        "problem": "matmul",
        "dtypes": ["float16"],
        "arrays": "torch",             # what A, B and C arrive as: cupy, torch or numba
        "parameters": {"BLOCK_M": [128, 64]},
        "edge": "BLOCK_M",
        "accepts": ["K % 32 == 0"],
    }

The function writes the product into the C it is given (gemmlab's own
output buffer, so that it can be poisoned before each launch and checked
after) and launches its work on the current stream of its array library,
which gemmlab sets to the stream it times; a Numba function gets that stream
as a ``stream`` keyword instead, since Numba has no current stream.

:func:`load` imports the file (running its top-level code, as any import
does) under a private module name and returns a :class:`PythonKernelSpec`;
the launch itself is :mod:`gemmlab.backends.python`'s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from gemmlab.core.errors import DeclarationError, GemmlabError
from gemmlab.core.shapes import MAX_THREADS_PER_BLOCK, Dim3, Shape
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
from gemmlab.kernels.declaration.expressions import FUNCTIONS, expression

# The module-level name of the declaration in the user's file.
DECLARATION = "GEMMLAB"
REQUIRED_KEYS = ("function", "problem", "dtypes", "arrays")
OPTIONAL_KEYS = ("summary", "parameters", "edge", "accepts", "kernel_name")
# Element types a Python function may declare: those problems/matmul.py
# prepares, checks and times beside cuBLAS (float16: A, B and C all float16, as
# for a declared .cu; bfloat16 has no array type in CuPy to hand over).
PYTHON_DTYPES = ("float32", "int32", "float16")
# What the arrays arrive as, with the module that must be importable for it.
ARRAYS = {"cupy": "cupy", "torch": "torch", "numba": "numba.cuda"}
# Modules a user's file may need that one of gemmlab's extras installs
# (pyproject.toml's optional-dependencies), by the extra's name.
EXTRAS = {"torch": "torch", "triton": "triton", "numba": "cpu"}
EXAMPLE = (
    'GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"} below the function'
)


@dataclass(frozen=True)
class PythonKernelSpec(DeclaredSpec):
    """A KernelSpec for a user's Python function. It has no launch geometry of
    its own (the function chooses it: grid and block read (0, 0, 0)); its
    parameters are keyword arguments of the function."""

    arrays: str = "cupy"
    # The GPU kernel the function launches, as Nsight Compute's --kernel-name
    # takes it ("name" or "regex:..."), when the declaration names it.
    kernel_name: str | None = None
    # The user's function, as imported; not compared (two loads of one file are the same kernel).
    callable: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    module: ModuleType | None = field(default=None, compare=False, repr=False)


def load(path: Path) -> PythonKernelSpec:
    """The kernel declared in the Python file ``path``; DeclarationError naming
    the file, the key and the fix for every mistake found, GemmlabError naming
    the extra to install when the file needs a library that is missing."""
    path = Path(path)
    module = import_file(path)
    data = getattr(module, DECLARATION, None)
    if not isinstance(data, dict):
        raise DeclarationError(
            f"{path} defines no {DECLARATION} dict saying which function to run and how.",
            f"Add {EXAMPLE}; {DOC} describes the keys.",
        )

    def at(key: str, index: int | None = None) -> str:
        return f"{path}, {DECLARATION}[{key!r}]" + ("" if index is None else f"[{index}]")

    check_keys(data, REQUIRED_KEYS, OPTIONAL_KEYS, path, f" in {DECLARATION}")
    if data["problem"] not in PROBLEMS:
        raise DeclarationError(f"{at('problem')}: unknown problem {data['problem']!r}.", f"Use {', '.join(PROBLEMS)}.")
    problem, _names = PROBLEMS[data["problem"]]
    arrays = _arrays(data["arrays"], at("arrays"))
    dtypes = tuple(as_list(data["dtypes"], at("dtypes"), 'a list of element types such as ["float32"]'))
    for dtype in dtypes:
        if dtype not in PYTHON_DTYPES:
            raise DeclarationError(
                f"{at('dtypes')}: {dtype!r} is not an element type a Python kernel may take.",
                f"Use {', '.join(PYTHON_DTYPES)}.",
            )
    parameters = _parameters(data.get("parameters", {}), at("parameters"))
    names = tuple(p.name for p in parameters)
    edge = data.get("edge")
    if edge is not None and edge not in names:
        raise DeclarationError(
            f"{at('edge')}: {edge!r} is not one of the parameters ({', '.join(names) or 'none declared'}).",
            "Name the parameter that is the block edge, or leave `edge` out.",
        )
    function = _function(module, data["function"], parameters, arrays, at("function"))
    accepts = [
        expression(e, at("accepts", i), ("M", "N", "K", *names), condition=True)
        for i, e in enumerate(as_list(data.get("accepts", []), at("accepts"), "a list of conditions", 0))
    ]

    def env(shape: Shape, block_edge: int) -> dict[str, int]:
        return {"M": shape.m, "N": shape.n, "K": shape.k, **parameter_values(parameters, edge, block_edge)}

    return PythonKernelSpec(
        # The folder and the stem, as for a declared .cu (kernels/user.py).
        id=f"{path.resolve().parent.name}/{path.stem}",
        source=path,
        function=data["function"],
        source_doc=f"your Python kernel ({path})",
        summary=str(data.get("summary", f"{data['function']} from {path.name} ({arrays} arrays)")),
        dtypes=dtypes,
        block_edges=next((p.values for p in parameters if p.name == edge), ()),
        grid=_chosen_by_function,
        block=_chosen_by_function,
        constraints=tuple(accepts_constraint(e, env) for e in accepts),
        max_edge=MAX_THREADS_PER_BLOCK,
        problem=problem,
        templated_on_edge=False,
        backend="python",
        cgma=None,  # no model of a function's global accesses, as for a declared .cu
        declaration=path,
        arrays=arrays,
        kernel_name=_kernel_name(data.get("kernel_name"), at("kernel_name")),
        parameters=parameters,
        edge=edge,
        callable=function,
        module=module,
    )


def _kernel_name(value: Any, where: str) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    raise DeclarationError(
        f"{where}: {value!r} is not a kernel's name.",
        'Give the name of the GPU kernel the function launches, e.g. "matmul_kernel" or "regex:gemm".',
    )


def profiled_name(spec: PythonKernelSpec) -> str:
    """The name Nsight Compute selects the function's GPU kernel by: the
    declared ``kernel_name``, else the one Triton kernel the file defines
    (Triton names a kernel after its function). Without either there is no
    telling which of the kernels the call launches is the user's."""
    if spec.kernel_name:
        return spec.kernel_name
    triton = [value for value in vars(spec.module or object()).values() if _is_triton_kernel(value)]
    if len(triton) == 1:
        jit = triton[0]
        while not hasattr(jit, "device_caches") and hasattr(jit, "fn"):
            jit = jit.fn
        return jit.fn.__name__
    raise DeclarationError(
        f"{spec.declaration}: gemmlab cannot tell which GPU kernel {spec.function} launches "
        f"({'no' if not triton else len(triton)} Triton kernels in the file).",
        f'Name it in {DECLARATION}: "kernel_name": "the_kernel" (or "regex:..." for a library\'s kernels).',
    )


def _is_triton_kernel(value: Any) -> bool:
    """A @triton.jit function (or an autotuned or heuristics wrapper of one)."""
    return type(value).__module__.startswith("triton.") and hasattr(value, "fn") and hasattr(value, "run")


def _chosen_by_function(shape: Shape, block_edge: int) -> Dim3:
    """A Python function picks its own grid and block; gemmlab does not see them."""
    return (0, 0, 0)


def import_file(path: Path) -> ModuleType:
    """The user's file imported under a private name (its top-level code runs);
    DeclarationError with the exception and the line of the file that raised it,
    GemmlabError naming the extra for a missing optional library."""
    if not path.is_file():
        raise DeclarationError(f"the Python kernel {path} does not exist.", "Check the path.")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"_gemmlab_user_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, "a .py file always has a loader"
    module = importlib.util.module_from_spec(spec)
    # Registered while it runs, as an import would be: dataclasses and pickling look it up by name.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise _import_error(path, exc) from None
    return module


def _import_error(path: Path, exc: Exception) -> GemmlabError:
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        if top in EXTRAS:
            return missing_library(top, f"{path} imports it")
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    line = _failing_line(path, exc)
    where = f" at line {line[0]} (`{line[1]}`)" if line else ""
    return DeclarationError(
        f"importing {path} failed{where}: {last}.",
        "Fix the file; gemmlab runs its top-level code when it reads the declaration, as `import` would.",
    )


def call_error(spec: PythonKernelSpec, exc: Exception, keywords: dict[str, int]) -> GemmlabError:
    """The error for the user's function raising when gemmlab calls it with
    ``keywords``: the exception's own last line and the line of the user's
    file it came from."""
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    line = _failing_line(Path(spec.source), exc)
    where = f" at line {line[0]} of {spec.source} (`{line[1]}`)" if line else ""
    arguments = ", ".join(["A", "B", "C", *(f"{k}={v}" for k, v in keywords.items())])
    return GemmlabError(
        f"{spec.id}: {spec.function} raised{where}: {last}.",
        f"Fix the function; gemmlab calls it as {spec.function}({arguments}) "
        f"with {spec.arrays} arrays on the GPU, and it must write the product into C.",
    )


def _failing_line(path: Path, exc: BaseException) -> tuple[int, str] | None:
    """The line of ``path`` where ``exc`` was raised (or, for a syntax error, found)."""
    target = str(path.resolve())
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == path.resolve():
        return (exc.lineno or 0, (exc.text or "").strip())
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if str(Path(f.filename).resolve()) == target]
    if not frames:
        return None
    return (frames[-1].lineno or 0, (frames[-1].line or "").strip())


def missing_library(module: str, why: str) -> GemmlabError:
    """The error for an optional library that is not installed, naming the extra that installs it."""
    extra = EXTRAS.get(module.split(".")[0])
    fix = f"pip install 'gemmlab[{extra}]'" if extra else f"pip install {module.split('.')[0]}"
    return GemmlabError(f"{module} is not installed, and {why}.", f"Install it with `{fix}`.")


def _arrays(value: Any, where: str) -> str:
    if value not in ARRAYS:
        raise DeclarationError(
            f"{where}: {value!r} is not a kind of array gemmlab passes.",
            f"Use one of {', '.join(ARRAYS)} (Triton kernels take torch tensors).",
        )
    module = ARRAYS[value]
    if not installed(module):
        raise missing_library(module, f'the kernel declares "arrays": "{value}"')
    return value


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (torch takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package (numba of numba.cuda) is missing
        return False


def _parameters(raw: Any, where: str) -> tuple[Parameter, ...]:
    if not isinstance(raw, dict):
        raise DeclarationError(
            f"{where}: expected a dict of name: [values].", 'Write e.g. "parameters": {"BLOCK_M": [128, 64]}.'
        )
    found = []
    for name, values in raw.items():
        here = f"{where}[{name!r}]"
        if not isinstance(name, str) or not name.isidentifier() or name in (*SIZE_NAMES, *FUNCTIONS, "stream"):
            raise DeclarationError(
                f"{here}: {name!r} cannot be a parameter's name.",
                "Use the name of a keyword argument of the function.",
            )
        values = as_list(values, here, "a list of whole numbers, the default first")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise DeclarationError(
                f"{here}: {values} are not all positive whole numbers.", "List whole numbers, the default first."
            )
        found.append(Parameter(name, "keyword", tuple(values)))
    return tuple(found)


def _function(
    module: ModuleType, name: Any, parameters: tuple[Parameter, ...], arrays: str, where: str
) -> Callable[..., Any]:
    """The declared function, checked to take (A, B, C) and the parameters as keywords."""
    function = getattr(module, name, None) if isinstance(name, str) else None
    if not callable(function):
        defined = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_"))
        raise DeclarationError(
            f"{where}: the file has no function {name!r} (its functions: {', '.join(defined) or 'none'}).",
            "Set `function` to the name of the function that computes C = A @ B.",
        )
    keywords = {p.name: p.values[0] for p in parameters}
    if arrays == "numba":
        keywords["stream"] = 0
    try:
        inspect.signature(function).bind("A", "B", "C", **keywords)
    except TypeError as exc:
        call = ", ".join(["A", "B", "C", *(f"{k}=..." for k in keywords)])
        raise DeclarationError(
            f"{where}: gemmlab calls {name}({call}), which its signature refuses: {exc}.",
            "Make the function take A, B and C, then every declared parameter"
            + (" and `stream`" if arrays == "numba" else "")
            + " as keyword arguments.",
        ) from None
    except ValueError:  # a builtin or extension function without a readable signature: called as declared
        pass
    return function
