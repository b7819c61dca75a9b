"""The source documents' published figures, as typed rows.

The CSVs under ``gemmlab/reference/`` are tidy copies of the documents'
measured-results tables (one number per row; see ``shared/reference/README.md``
in the project for how each was transcribed). This module loads them, maps the
documents' kernel names to catalogue ids and answers "what did the document
print for this kernel, metric, size and block edge".
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib import resources

from gemmlab.core.errors import UnknownName

# The documents' kernel names -> catalogue ids. None: the document measured
# something gemmlab has no kernel for; its rows are kept and labelled.
DOC_KERNEL_IDS: dict[str, str | None] = {
    # Poznań 2014 (five versions, v4 in two flavours).
    "v1": "single_block",
    "v2": "naive",
    "v3": "tiled",
    "v4a": "tiled_prefetch_reg",
    "v4b": "tiled_prefetch_smem",
    "v5": "tiled_2x2",
    # 2023 int32 lab report.
    "naive_i32": "naive_i32",
    "shared_i32": "tiled_i32",
    # Brno 2014 lecture: the CSV already uses our ids, except the kernel that
    # reads and writes with a stride, which only serves as a worst case there.
    "transpose_naive": "transpose_naive",
    "copy": "copy",
    "transpose_tiled": "transpose_tiled",
    "copy_tiled": "copy_tiled",
    "transpose_tiled_padded": "transpose_tiled_padded",
    "transpose_strided_both": None,
    # Kursk 2014 paper. Its naive kernel takes the row from threadIdx.x, which
    # is our uncoalesced variant, not `naive`.
    "gpu_naive": "naive_uncoalesced",
    "gpu_col_buffered": "col_buffered",
    "gpu_row_buffered": "row_buffered",
    "gpu_blocked": "tiled",
    "gpu_blocked_unroll4": "blocked_x4",
    "cpu_naive": "cpu_naive",
}


@dataclass(frozen=True)
class ReferenceFile:
    """One CSV and the sizes of it that belong to an experiment (None: all)."""

    name: str
    sizes: frozenset[int] | None = None


# Which published figures each experiment re-runs. The Poznań report measured
# two groups of sizes; `tiled` (its v3) appears in both, so the group decides.
EXPERIMENT_REFERENCES: dict[str, ReferenceFile | None] = {
    "poznan-group1": ReferenceFile("poznan2014_gt240.csv", frozenset({176, 352, 528})),
    "poznan-group2": ReferenceFile("poznan2014_gt240.csv", frozenset({128, 256, 384, 512, 640})),
    "int32-lab": ReferenceFile("int32lab_gemm.csv"),
    "brno-transpose": ReferenceFile("brno2014_transpose_gtx280.csv"),
    # The Arequipa report has no measurements.
    "arequipa-any-size": None,
    "kursk-cpu-gpu": ReferenceFile("kursk2014_cpu_gpu.csv"),
}

REFERENCE_FILES = (
    "poznan2014_gt240.csv",
    "int32lab_gemm.csv",
    "brno2014_transpose_gtx280.csv",
    "kursk2014_cpu_gpu.csv",
)

# The CSVs' metric names -> the report's, with the factor that converts the
# printed unit to ours (seconds become milliseconds).
_METRICS: dict[str, tuple[str, float]] = {
    "time_ms": ("time_ms", 1.0),
    "time_s": ("time_ms", 1e3),
    "gflops": ("gflops", 1.0),
    "gips": ("gips", 1.0),
    "cgma": ("cgma", 1.0),
    "bandwidth_gbs": ("gbs", 1.0),
}
METRICS = frozenset(name for name, _ in _METRICS.values())


@dataclass(frozen=True)
class ReferenceRow:
    """One published number, as printed (``value`` in ``unit``)."""

    source_doc: str
    table: str
    device: str
    kernel: str  # the document's name
    variant: str
    n: int
    block: int | None
    metric: str  # the CSV's name: time_ms, time_s, gflops, gips, cgma, bandwidth_gbs
    value: float
    unit: str
    note: str

    @property
    def kernel_id(self) -> str | None:
        """The catalogue id, or None where gemmlab has no such kernel."""
        return DOC_KERNEL_IDS[self.kernel]

    @property
    def label(self) -> str:
        """The catalogue id, or the document's name marked as having none."""
        return kernel_label(self.kernel)

    @property
    def report_metric(self) -> str:
        return _METRICS[self.metric][0]

    @property
    def report_value(self) -> float:
        """The value in the report's unit (milliseconds for times)."""
        return self.value * _METRICS[self.metric][1]


def kernel_label(doc_kernel: str) -> str:
    kernel_id = DOC_KERNEL_IDS[doc_kernel]
    return kernel_id if kernel_id is not None else f"{doc_kernel} (no gemmlab kernel)"


def _parse(name: str, text: str) -> list[ReferenceRow]:
    rows = []
    for line_no, rec in enumerate(csv.DictReader(io.StringIO(text)), start=2):
        if rec["kernel"] not in DOC_KERNEL_IDS or rec["metric"] not in _METRICS:
            # A new kernel or metric in a CSV must be mapped above before it
            # can be shown beside our numbers.
            raise UnknownName(
                f"{name} line {line_no}: kernel '{rec['kernel']}' / metric '{rec['metric']}' is not mapped.",
                "Add it to DOC_KERNEL_IDS or _METRICS in gemmlab/reference.py.",
            )
        rows.append(
            ReferenceRow(
                source_doc=rec["source_doc"],
                table=rec["table"],
                device=rec["device"],
                kernel=rec["kernel"],
                variant=rec["variant"],
                n=int(rec["n"]),
                block=int(rec["block"]) if rec["block"] else None,
                metric=rec["metric"],
                value=float(rec["value"]),
                unit=rec["unit"],
                note=rec["note"],
            )
        )
    return rows


@functools.cache
def load(name: str) -> tuple[ReferenceRow, ...]:
    """Every row of one reference CSV (a name from REFERENCE_FILES)."""
    if name not in REFERENCE_FILES:
        raise UnknownName(f"No reference file '{name}'.", f"Known: {', '.join(REFERENCE_FILES)}.")
    text = resources.files("gemmlab").joinpath("reference", name).read_text(encoding="utf-8")
    return tuple(_parse(name, text))


def load_all() -> dict[str, tuple[ReferenceRow, ...]]:
    return {name: load(name) for name in REFERENCE_FILES}


def experiment_rows(experiment: str) -> tuple[ReferenceRow, ...]:
    """The published rows an experiment re-runs (empty where the document has none)."""
    ref = EXPERIMENT_REFERENCES.get(experiment)
    if ref is None:
        return ()
    return tuple(r for r in load(ref.name) if ref.sizes is None or r.n in ref.sizes)


def published(
    experiment: str, kernel: str, metric: str, device: str | None = None
) -> dict[tuple[int, int | None], tuple[float, str]]:
    """{(n, block): (value, device)} the document printed for this kernel and metric.

    ``kernel`` is a catalogue id or, for a kernel gemmlab lacks, the
    document's name; ``metric`` is one of METRICS (time_ms, gflops, gbs, gips,
    cgma), values converted to the report's units. Where a document measured
    the same cell on two machines (Kursk: Tables 1 and 2), the later table
    wins unless ``device`` picks one.
    """
    if metric not in METRICS:
        raise UnknownName(f"No published metric '{metric}'.", f"Known: {', '.join(sorted(METRICS))}.")
    found: dict[tuple[int, int | None], tuple[float, str]] = {}
    for r in experiment_rows(experiment):
        if kernel not in (r.kernel_id, r.kernel) or r.report_metric != metric:
            continue
        if device is not None and r.device != device:
            continue
        found[(r.n, r.block)] = (r.report_value, r.device)
    return found


def devices(experiment: str) -> list[str]:
    """The machines an experiment's published figures come from, in the document's order."""
    return list(dict.fromkeys(r.device for r in experiment_rows(experiment)))
