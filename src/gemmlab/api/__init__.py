"""gemmlab from Python: what the command line does, for notebooks and scripts.

    import gemmlab.api as lab

    mine = lab.kernel("examples/naive_define/matmul.toml")   # or a catalogue id, or lab.declare(...)
    mine.compile(arch="sm_90")                                 # registers, shared memory, spills: no GPU needed
    result = mine.run(1024, block=16)                          # verified and timed beside cuBLAS
    result                                                     # a table in Jupyter
    lab.run(mine, 1024, vs=["tiled", "sgemm_padded_b"])        # a comparison on one shape
    sweep = lab.sweep([mine, "tiled"], sizes=[256, 512, 1024], db="lab.sqlite")
    sweep.frame()                                              # a pandas DataFrame (the `pandas` extra)
    lab.results("lab.sqlite").to_pandas()                      # everything stored; also .to_csv(), .to_parquet()

Every function raises the same :class:`~gemmlab.core.errors.GemmlabError`
subclasses the command line prints; their ``cause`` and ``fix`` say what went
wrong and what to do. docs/api.md is the reference with examples.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from gemmlab import backends
from gemmlab.core.errors import DeclarationError
from gemmlab.core.extras import require
from gemmlab.core.outputs import write_file
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.results.store import DEFAULT_PATH, Store
from gemmlab.studies.sweep import SweepSummary

__all__ = [
    "Comparison",
    "Kernel",
    "Result",
    "Results",
    "Sweep",
    "declare",
    "failures",
    "kernel",
    "results",
    "run",
    "sweep",
]

# Where declare() writes the declarations it builds, when set; None (the default):
# declared_dir(), found again at each call.
DECLARED_DIR: Path | None = None
# The order the command line's tables use; a result's other fields follow in the frame.
_HEADLINE = ("kernel", "m", "n", "k", "block_edge", "dtype", "median_ms", "gflops", "ratio_to_baseline", "error")


@dataclass(frozen=True)
class Kernel:
    """A kernel to measure: from the catalogue, a user's file, or :func:`declare`."""

    spec: KernelSpec

    @property
    def id(self) -> str:
        return self.spec.id

    def run(self, size: int | None = None, **options: Any) -> Result | Comparison:
        """:func:`run` on this kernel."""
        return run(self, size, **options)

    def sweep(self, sizes: Iterable[int], **options: Any) -> Sweep:
        """:func:`sweep` of this kernel alone."""
        return sweep([self], sizes, **options)

    def compile(self, arch: str = "sm_90", block: int | None = None, dtype: str | None = None) -> dict:
        """Compile for ``arch`` (no GPU needed) and return the resources: registers, shared memory, spills."""
        from gemmlab.backends.nvrtc import compile_kernel, normalise_arch

        edge = block if block is not None else self.spec.default_block_edge()
        compiled = compile_kernel(self.spec, edge, dtype or self.spec.dtypes[0], normalise_arch(arch))
        return {"kernel": self.id, "arch": compiled.arch, "block_edge": edge, **vars(compiled.resources)}

    def _repr_html_(self) -> str:
        rows = [("id", self.id), ("summary", self.spec.summary), ("element types", ", ".join(self.spec.dtypes)),
                ("block edges", ", ".join(map(str, self.spec.block_edges)) or "-"),
                ("needs", "; ".join(self.spec.needs) or "-"), ("from", self.spec.source_doc)]  # fmt: skip
        return _html_table(f"kernel {self.id}", rows)


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


def run(
    which: str | Path | Kernel,
    size: int | None = None,
    *,
    m: int | None = None,
    n: int | None = None,
    k: int | None = None,
    block: int | None = None,
    dtype: str | None = None,
    vs: Sequence[str | Path | Kernel] = (),
    reps: int = 20,
    flush_l2: bool = False,
    seed: int | None = None,
    baseline: bool = True,
) -> Result | Comparison:
    """Run a kernel once on a shape: verified against a float64 reference and
    timed beside its library. ``size``: a square shape; or ``m``, ``n``, ``k``.
    ``vs``: other kernels run on the same shape (each with its default block
    edge and the first kernel's element type); a :class:`Comparison` then."""
    from gemmlab.measure.run import run as run_kernel

    shape = _shape(size, m, n, k)
    first = kernel(which)
    results = [run_kernel(first.id, shape, block, dtype, reps=reps, flush_l2=flush_l2, seed=seed,
                          baseline=baseline, spec=first.spec)]  # fmt: skip
    for other in map(kernel, vs):
        results.append(run_kernel(other.id, shape, None, results[0].dtype, reps=reps, flush_l2=flush_l2,
                                  seed=seed, baseline=baseline, spec=other.spec))  # fmt: skip
    wrapped = [Result(r.to_dict()) for r in results]
    return Comparison(wrapped) if vs else wrapped[0]


def sweep(
    kernels: Sequence[str | Path | Kernel],
    sizes: Iterable[int] | None = None,
    *,
    shapes: Iterable[tuple[int, int, int]] | None = None,
    blocks: Sequence[int] | None = None,
    dtype: str | None = None,
    db: str | Path = DEFAULT_PATH,
    experiment: str | None = None,
    force: bool = False,
    reps: int = 20,
    max_seconds: float = 2.0,
    progress: bool = False,
) -> Sweep:
    """Kernels x shapes x block edges, every point stored in ``db`` as it is
    measured; calling it again resumes (stored points are skipped, ``force``
    measures them again). ``sizes``: square shapes; ``shapes``: (M, N, K)s."""
    from gemmlab.studies.points import plan
    from gemmlab.studies.sweep import sweep as run_sweep

    wanted = [Shape.square(s) for s in sizes or ()] + [Shape(*s) for s in shapes or ()]
    if not wanted:
        raise DeclarationError("a sweep needs sizes or shapes.", "Give sizes=[256, 512] or shapes=[(M, N, K)].")
    # The CPU baselines have no spec; every other kernel is named by its id from here on.
    names = [k if isinstance(k, str) and _on_host(k) else kernel(k).id for k in kernels]
    points, refused = plan(names, wanted, blocks, dtype, reps=reps)
    with Store.open(db) as store:
        summary = run_sweep(points, store, experiment, force=force, progress=progress, max_seconds=max_seconds)
    summary.refused[:0] = refused
    return Sweep(summary, Path(db), experiment, [p.kernel for p in points])


def results(db: str | Path = DEFAULT_PATH, experiment: str | None = None, *, kernel: str | None = None) -> Results:
    """The stored results: one row per measured point with its run's GPU and
    date; ``experiment=None``: all. ``.to_pandas()``, ``.to_csv()``, ``.to_parquet()``."""
    with Store.open(db, readonly=True) as store:
        rows = store.rows(experiment)
    if kernel is not None:
        rows = [r for r in rows if r["kernel"] == _stored_id(kernel)]
    return Results(_headline_first(rows))


def failures(db: str | Path = DEFAULT_PATH, experiment: str | None = None) -> Any:
    """The points that failed (wrong answer, fault, hang) with their reasons, as a DataFrame."""
    pandas = require("pandas", "pandas", "Failures as a DataFrame")
    with Store.open(db, readonly=True) as store:
        rows = store.failures(experiment, all_experiments=experiment is None)
    return pandas.DataFrame(rows)


@dataclass
class Results:
    """Stored results, one row per measured point: the rows the database keeps,
    the headline columns first (kernel, shape, block edge, dtype, time, GFLOPS)."""

    rows: list[dict]

    def __len__(self) -> int:
        return len(self.rows)

    def columns(self) -> list[str]:
        """Every column any row has, in the rows' order (all rows share them)."""
        return list(dict.fromkeys(key for row in self.rows for key in row))

    def to_pandas(self) -> Any:
        """A pandas DataFrame (the ``pandas`` extra)."""
        return _frame(require("pandas", "pandas", "Results as a DataFrame"), self.rows)

    def to_csv(self, path: str | Path) -> Path:
        """Write the rows as CSV, one line per point; a list or dict value
        (warnings, the profile) as JSON text. Needs no extra. The file is
        written whole or not at all, its missing folders created
        (gemmlab.core.outputs); a path that cannot be written raises OutputError."""

        def fill(tmp: Path) -> None:
            with tmp.open("w", newline="") as out:
                self.write_csv(out)

        return write_file(Path(path), fill)

    def write_csv(self, stream: TextIO) -> None:
        """The CSV :meth:`to_csv` writes, into an open text stream (``sys.stdout``)."""
        writer = csv.DictWriter(stream, fieldnames=self.columns())
        writer.writeheader()
        writer.writerows(map(_scalar_values, self.rows))

    def to_parquet(self, path: str | Path) -> Path:
        """Write the rows as Parquet (the ``parquet`` extra: pyarrow), the same
        columns as :meth:`to_csv`, whole or not at all as :meth:`to_csv` does."""
        table = self._arrow_table()  # the extra is checked before any file is touched
        parquet = require("pyarrow.parquet", "parquet", "Writing Parquet")
        return write_file(Path(path), lambda tmp: parquet.write_table(table, tmp))

    def write_parquet(self, stream: BinaryIO) -> None:
        """The Parquet :meth:`to_parquet` writes, into an open binary stream."""
        parquet = require("pyarrow.parquet", "parquet", "Writing Parquet")
        parquet.write_table(self._arrow_table(), stream)

    def _arrow_table(self) -> Any:
        require("pyarrow", "parquet", "Writing Parquet")
        import pyarrow

        return pyarrow.Table.from_pylist([_scalar_values(r) for r in self.rows])

    def _repr_html_(self) -> str:
        kernels = sorted({str(r["kernel"]) for r in self.rows})
        return _html_table(f"{len(self.rows)} stored results", [("kernels", ", ".join(kernels) or "-")])


@dataclass
class Result:
    """One verified, timed point, as the store keeps it (:meth:`to_dict`);
    its fields are also attributes (``result.gflops``)."""

    data: dict

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["data"][name]
        except KeyError:
            raise AttributeError(name) from None

    def to_dict(self) -> dict:
        return dict(self.data)

    def row(self) -> dict:
        """The flat row the store would hold (timing and resources flattened)."""
        from gemmlab.results.store import result_row

        return result_row(self.data)

    def frame(self) -> Any:
        return _frame(require("pandas", "pandas", "A result as a DataFrame"), [self.row()])

    def _repr_html_(self) -> str:
        r, t, used = self.data, self.data["timing"], self.data["resources"]
        memory_bound = r.get("metric") == "gbs"
        figure = ("GB/s", f"{r['gbytes_per_s']:,.1f}") if memory_bound else ("GFLOPS", f"{r['gflops']:,.1f}")
        rows = [
            ("time (median) [ms]", f"{t['median_ms']:.4f}"),
            figure,
            ("error (tolerance)", f"{r['error']:.2e} ({r['tolerance']:.0e})"),
            ("grid x block", f"{tuple(r['grid'])} x {tuple(r['block'])}"),
            ("registers / static smem", f"{used['registers']} / {used['smem_bytes']} B"),
        ]
        if r.get("ratio_to_baseline") is not None:
            rows.append((f"ratio to {r['baseline_name']}", f"{r['ratio_to_baseline']:.1%}"))
        rows += [("warning", w) for w in r.get("warnings") or ()]
        title = f"{r['kernel']}  {r['m']}x{r['n']}x{r['k']}  block edge {r['block_edge'] or '-'}  {r['dtype']}"
        return _html_table(f"{title}  on {r['device'].get('name', '?')}", rows)


@dataclass
class Comparison:
    """The results of one :func:`run` with ``vs``: several kernels, one shape."""

    results: list[Result]

    def frame(self) -> Any:
        return _frame(require("pandas", "pandas", "A comparison as a DataFrame"), [r.row() for r in self.results])

    def _repr_html_(self) -> str:
        rows = [(r.kernel, f"{r.timing['median_ms']:.4f} ms, {r.gflops:,.1f} GFLOPS"
                 + (f", {r.ratio_to_baseline:.1%} of library" if r.ratio_to_baseline is not None else ""))
                for r in self.results]  # fmt: skip
        first = self.results[0]
        return _html_table(f"{first.m}x{first.n}x{first.k} {first.dtype}", rows)


@dataclass
class Sweep:
    """What a :func:`sweep` did (``summary``: measured, already stored, refused,
    failed) and where its results are."""

    summary: SweepSummary
    db: Path
    experiment: str | None
    kernels: list[str] = field(default_factory=list)

    def frame(self) -> Any:
        """This sweep's kernels' stored results as a DataFrame."""
        pandas = require("pandas", "pandas", "A sweep's results as a DataFrame")
        with Store.open(self.db, readonly=True) as store:
            rows = [r for r in store.rows(self.experiment) if r["kernel"] in self.kernels]
        return _frame(pandas, rows)

    def _repr_html_(self) -> str:
        return _html_table(f"sweep into {self.db}", [("", line) for line in self.summary.lines()])


def _shape(size: int | None, m: int | None, n: int | None, k: int | None) -> Shape:
    if size is not None and not (m or n or k):
        return Shape.square(size)
    if size is None and m and n and k:
        return Shape(m, n, k)
    raise DeclarationError(
        "a run needs one square size or all of m, n and k.", "Give run(kernel, 1024) or run(kernel, m=.., n=.., k=..)."
    )


def _on_host(name: str) -> bool:
    return backends.on_host(name)


def _stored_id(name: str | Path | Kernel) -> str:
    if isinstance(name, str) and (_on_host(name) or name in catalogue.kernel_ids()):
        return name
    return kernel(name).id


def _frame(pandas: Any, rows: list[dict]) -> Any:
    return pandas.DataFrame(_headline_first(rows))


def _headline_first(rows: list[dict]) -> list[dict]:
    """Each row with the command line's headline columns first, the rest in their stored order."""
    return [{**{c: r[c] for c in _HEADLINE if c in r}, **r} for r in rows]


def _scalar_values(row: dict) -> dict:
    """A row a CSV or Parquet column takes: lists and dicts (warnings, profile_json) as JSON text."""
    return {k: json.dumps(v, default=str) if isinstance(v, list | dict) else v for k, v in row.items()}


def _html_table(title: str, rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(a))}</th>"
                   f"<td style='text-align:right'>{html.escape(str(b))}</td></tr>" for a, b in rows)  # fmt: skip
    return f"<table><caption>{html.escape(title)}</caption>{body}</table>"


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
