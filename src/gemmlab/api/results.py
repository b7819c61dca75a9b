"""What is stored, read back from Python: results, failures, and the objects
that :func:`~gemmlab.api.run` and :func:`~gemmlab.api.sweep` return."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from gemmlab import backends
from gemmlab.api.display import html_table
from gemmlab.api.kernels import Kernel, kernel
from gemmlab.core.extras import require
from gemmlab.core.outputs import write_file
from gemmlab.kernels import catalogue
from gemmlab.store.store import DEFAULT_PATH, Store
from gemmlab.studies.sweep import SweepSummary

__all__ = ["DEFAULT_PATH", "Comparison", "Result", "Results", "Store", "Sweep", "failures", "results"]

# The order the command line's tables use; a result's other fields follow in the frame.
_HEADLINE = ("kernel", "m", "n", "k", "block_edge", "dtype", "median_ms", "gflops", "ratio_to_baseline", "error")


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
        return html_table(f"{len(self.rows)} stored results", [("kernels", ", ".join(kernels) or "-")])


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
        from gemmlab.store.store import result_row

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
        return html_table(f"{title}  on {r['device'].get('name', '?')}", rows)


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
        return html_table(f"{first.m}x{first.n}x{first.k} {first.dtype}", rows)


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
        return html_table(f"sweep into {self.db}", [("", line) for line in self.summary.lines()])


def _stored_id(name: str | Path | Kernel) -> str:
    if isinstance(name, str) and (backends.on_host(name) or name in catalogue.kernel_ids()):
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
