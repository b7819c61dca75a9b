"""This GPU's peak rates from Python and for `gemmlab peak`: FP32 FFMA and the
tensor-core instructions (mma.sync, Hopper's wgmma) measured, each beside the
nominal rate at the SM clock it ran at (:mod:`gemmlab.measure.peak`), and
stored in the results database, where the report's summary reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gemmlab.store.store import DEFAULT_PATH, Store

if TYPE_CHECKING:
    from gemmlab.measure.peak import Peak

__all__ = ["Peaks", "measure"]


@dataclass(frozen=True)
class Peaks:
    """The peaks measured on one GPU, and the families it does not measure."""

    gpu_name: str
    measured: list[Peak]
    left_out: list[tuple[str, str]]  # (family, why)


def measure(dtypes: Sequence[str] | None = None, db: str | Path = DEFAULT_PATH) -> Peaks:
    """Measure the peak of each instruction family for ``dtypes`` (None: all;
    float32 is FFMA): each runs alone for a second so that the clock settles
    under load, then 10 launches are timed. The peaks are stored in ``db`` as
    a run of their own. An unknown element type, or no GPU, is refused before
    the database is created."""
    from gemmlab.core import gpu
    from gemmlab.measure import peak
    from gemmlab.studies.sweep import run_record

    checked = peak.checked_dtypes(dtypes)
    gpu.cupy()
    with Store.open(db) as store:
        peaks = peak.measure(checked)
        store.add_peaks(store.start_run(run_record()), [p.row() for p in peaks])
    device = gpu.describe(0)
    return Peaks(device.name, peaks, peak.left_out(device.cc))
