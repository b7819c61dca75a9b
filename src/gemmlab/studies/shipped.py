"""The dispatcher's tables that gemmlab ships: per GPU, the picks measured on
the shape suite on one of that model (package data, studies/tables/*.json,
written by benchmarks/scripts/ship_tables.py from a `dispatch_bench.py` run
kept in benchmarks/results/). They are read beside the picks a user tunes:
a pick tuned here for a shape replaces the shipped one, and both correct the
cost model for every other shape (:mod:`gemmlab.studies.costmodel`).

A table file holds {"gpu_name", "cc", "sms", "clock_mhz", "dram_gbs", "measured" (date), "sources"
(the results files it came from), "picks": [{"dtype", "m", "n", "k",
"kernel", "config", "median_ms", "cublas_ms", "timing_method",
"cublas_timing_method"}], and, where the run kept them, "measurements": [{"dtype",
"m", "n", "k", "kernel", "config", "median_ms"}] (every verified candidate timed)}.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.store.records import Config, Pick
from gemmlab.studies.costmodel import GPUModel, Timed


@dataclass(frozen=True)
class ShippedTable:
    gpu_name: str
    cc: str
    sms: int
    measured: str  # the date of the measurements
    sources: tuple[str, ...]
    picks: tuple[Pick, ...]
    clock_mhz: float = 1980.0  # the GPU's boost clock and nominal DRAM bandwidth, for the cost model
    dram_gbs: float = 3352.0
    # Every verified candidate the tuning timed, picks included (tables written
    # from a dispatch_bench.py run that kept them): more for the model's correction.
    measurements: tuple[Timed, ...] = ()

    @property
    def model(self) -> GPUModel:
        """The cost model's figures of this table's GPU."""
        cc = tuple(int(part) for part in self.cc.split("."))
        return GPUModel(self.gpu_name, (cc[0], cc[1]), self.sms, self.clock_mhz / 1e3, self.dram_gbs)


def table_from_dict(found: dict, where: str) -> ShippedTable:
    """A table as its file holds it; a GemmlabError naming ``where`` when it is not one."""
    try:
        name, cc, measured = str(found["gpu_name"]), str(found["cc"]), str(found["measured"])
        picks = tuple(_pick(name, cc, measured, p) for p in found["picks"])
        timed = tuple(_timed(t) for t in found.get("measurements", ()))
        clock, dram = float(found.get("clock_mhz", 1980.0)), float(found.get("dram_gbs", 3352.0))
        sources = tuple(found.get("sources", ()))
        return ShippedTable(name, cc, int(found["sms"]), measured, sources, picks, clock, dram, timed)
    except (KeyError, TypeError, ValueError) as exc:
        raise GemmlabError(
            f"The dispatcher table {where} is not one gemmlab wrote ({exc!r}).",
            "Reinstall gemmlab, or rebuild it with benchmarks/scripts/ship_tables.py.",
        ) from exc


def _timed(t: dict) -> Timed:
    shape = Shape(int(t["m"]), int(t["n"]), int(t["k"]))
    return Timed(t["dtype"], shape, t["kernel"], Config.of(t["config"]), float(t["median_ms"]))


def _pick(gpu_name: str, cc: str, measured: str, p: dict) -> Pick:
    cublas = p.get("cublas_ms")
    return Pick(
        gpu_name=gpu_name, cc=cc, dtype=p["dtype"], m=int(p["m"]), n=int(p["n"]), k=int(p["k"]), kernel=p["kernel"],
        config=Config.of(p["config"]), median_ms=float(p["median_ms"]),
        cublas_ms=None if cublas is None else float(cublas), verified=True, timing_method=p.get("timing_method"),
        cublas_timing_method=p.get("cublas_timing_method"), created=measured,
    )  # fmt: skip


@cache
def tables() -> tuple[ShippedTable, ...]:
    """Every table shipped in the package, in file-name order."""
    folder = resources.files("gemmlab.studies") / "tables"
    if not folder.is_dir():
        return ()
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            text = entry.read_text(encoding="utf-8")
            found.append(table_from_dict(json.loads(text), f"gemmlab/studies/tables/{entry.name}"))
    return tuple(found)


def shipped_picks(gpu_name: str | None = None) -> list[Pick]:
    """The shipped picks of the GPU named ``gpu_name`` (None: every GPU's)."""
    return [p for t in tables() if gpu_name is None or t.gpu_name == gpu_name for p in t.picks]


def shipped_measurements(gpu_name: str) -> list[Timed]:
    """Every candidate time the shipped table of ``gpu_name`` keeps (none for an older table)."""
    return [m for t in tables() if t.gpu_name == gpu_name for m in t.measurements]


def merged(tuned: Sequence[Pick], shipped: Iterable[Pick]) -> list[Pick]:
    """``tuned`` (a user's picks of one GPU) and the shipped picks for shapes they do not cover."""
    have = {(p.dtype, p.shape) for p in tuned}
    return [*tuned, *(p for p in shipped if (p.dtype, p.shape) not in have)]
