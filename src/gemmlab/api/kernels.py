"""A kernel to measure from Python: one of the catalogue, a user's file, or a
declaration built in Python (:func:`declare`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemmlab.api.display import html_table
from gemmlab.core.errors import DeclarationError
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec

if TYPE_CHECKING:
    from gemmlab.api.results import Comparison, Result, Sweep

# Where declare() writes the declarations it builds, when set; None (the default):
# declared_dir(), found again at each call.
DECLARED_DIR: Path | None = None


@dataclass(frozen=True)
class Kernel:
    """A kernel to measure: from the catalogue, a user's file, or :func:`declare`."""

    spec: KernelSpec

    @property
    def id(self) -> str:
        return self.spec.id

    def run(self, size: int | None = None, **options: Any) -> Result | Comparison:
        """:func:`run` on this kernel."""
        from gemmlab.api.run import run

        return run(self, size, **options)

    def sweep(self, sizes: Iterable[int], **options: Any) -> Sweep:
        """:func:`sweep` of this kernel alone."""
        from gemmlab.api.sweep import sweep

        return sweep([self], sizes, **options)

    def compile(self, arch: str | None = None, block: int | None = None, dtype: str | None = None) -> dict:
        """Compile one block edge (no GPU needed) as `gemmlab compile` does, and return its row: the
        architecture compiled for, registers, shared memory, stack, spills. ``arch`` None: this GPU's, or
        sm_90 without one; ``block`` None: the kernel's default edge."""
        from gemmlab.api.compile import compile_one

        return compile_one(self.spec, arch, block, dtype)

    def _repr_html_(self) -> str:
        rows = [("id", self.id), ("summary", self.spec.summary), ("element types", ", ".join(self.spec.dtypes)),
                ("block edges", ", ".join(map(str, self.spec.block_edges)) or "-"),
                ("needs", "; ".join(self.spec.needs) or "-"), ("from", self.spec.source_doc)]  # fmt: skip
        return html_table(f"kernel {self.id}", rows)


def kernel(name: str | Path | Kernel) -> Kernel:
    """A kernel by catalogue id (``"tiled"``), by the path of a user's file
    (``.toml``, ``.cu`` with its declaration beside it, ``.py``), or by the id
    of a user's kernel read earlier in this process."""
    if isinstance(name, Kernel):
        return name
    return Kernel(catalogue.get(str(name)))


def declared_dir() -> Path:
    """Where :func:`declare` writes: ``declared/`` in gemmlab's cache folder, the
    one the compiled cubins go to (``GEMMLAB_CACHE``, else ``~/.cache/gemmlab``),
    unless :data:`DECLARED_DIR` says otherwise. One folder per content below it,
    so a changed declaration is a new file and an old one is never overwritten
    under a run."""
    from gemmlab.backends.nvrtc import cache_dir

    return DECLARED_DIR or cache_dir().parent / "declared"


def declare(source: str | Path, **keys: Any) -> Kernel:
    """A user's kernel declared in Python instead of a TOML file: ``keys`` are
    the declaration's (docs/user-kernels.md), ``source`` the ``.cu`` file.

    The declaration is written as TOML under :func:`declared_dir`, in a folder
    named like the ``.cu``'s own, so the kernel keeps the id a TOML beside it
    would give (folder/stem) and a sweep's worker process can read it again. A
    mistake in ``keys`` is told about ``source`` and the key, as declare() was
    called, never about the file written for it."""
    source = Path(source).resolve()
    if not source.is_file():
        raise DeclarationError(f"the kernel file {source} does not exist.", "Give the path of your .cu file.")
    text = _toml({"source": str(source), **keys})
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = declared_dir() / digest / source.parent.name / f"{source.stem}.toml"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file():
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(text)
            temporary.replace(path)
    except OSError as exc:
        raise DeclarationError(
            f"declare() cannot write the declaration of {source} into {path.parent}: {exc.strerror or exc}.",
            "Set GEMMLAB_CACHE to a folder you can write (gemmlab keeps its compiles and declarations there).",
        ) from None
    try:
        return kernel(path)
    except DeclarationError as exc:
        path.unlink(missing_ok=True)  # a declaration that was refused is not kept
        called = f"declare({str(source)!r})"
        raise DeclarationError(exc.cause.replace(str(path), called), exc.fix.replace(str(path), called)) from None


def _toml(data: dict) -> str:
    """The declaration's keys as TOML: strings, whole numbers, lists of them, and the parameters table."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append(f"\n[{key}]\n" + "".join(f"{k} = {_toml_value(v, f'{key}.{k}')}\n" for k, v in value.items()))
        elif value is not None:
            lines.append(f"{key} = {_toml_value(value, key)}\n")
    return "".join(lines) + "".join(tables)


def _toml_value(value: Any, key: str) -> str:
    if isinstance(value, bool):
        raise DeclarationError(f"declare(): {key} = {value!r} is not a value a declaration takes.",
                               "Give strings, whole numbers, or lists of them.")  # fmt: skip
    if isinstance(value, str | int):
        return json.dumps(value)  # a JSON string or integer is valid TOML
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v, key) for v in value) + "]"
    raise DeclarationError(
        f"declare(): {key} = {value!r} is not a value a declaration takes.",
        "Give strings, whole numbers, or lists of them (docs/user-kernels.md lists the keys).",
    )
