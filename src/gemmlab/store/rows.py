"""The rows callers give the store, as dicts: each table's fields, a result's
point key, and a measured result (a RunResult or its ``to_dict()``) flattened
to a row of the ``results`` table (:func:`result_row`) and of ``compiles``
(:func:`compile_row`). Results are read back as dicts of the same fields."""

from __future__ import annotations

import json
from typing import Any

from gemmlab.core.timing import Timing
from gemmlab.store.records import config_text

CEILING_FIELDS = ("peak_gflops_measured", "bandwidth_gbs_measured")
RUN_FIELDS = (
    "started", "gemmlab_version", "git_revision", "gpu_name", "cc", "sm_clock_mhz", "memory_clock_mhz",
    "driver_version", "runtime_version", "nvrtc_version", "cpu", "host_name", "python", "command_line",
    *CEILING_FIELDS,
)  # fmt: skip
PROFILE_FIELDS = (
    "gips", "inst_executed", "flops_measured", "global_requests", "cgma_measured", "cgma_analytic",
    "achieved_occupancy", "dram_bytes",
)  # fmt: skip
# What rows() adds to each result from its run (``started`` is renamed ``date``).
RUN_FIELDS_IN_ROWS = ("gpu_name", "cc", "date", *(f for f in RUN_FIELDS if f not in ("gpu_name", "cc", "started")))
# Peak fields a caller gives (gemmlab.measure.peak.Peak.row(); id, run_id and created are computed).
PEAK_FIELDS = (
    "family", "instruction", "dtype", "gflops", "nominal_gflops", "ratio_to_nominal", "sm_clock_after_mhz",
    "median_ms", "min_ms", "max_ms", "reps", "flops", "iterations", "grid", "block", "registers", "arch", "warnings",
)  # fmt: skip
# How a result was measured (schema v13; gemmlab.measure.series).
MEASURE_FIELDS = (
    "ratio_low", "ratio_high", "activity", "kernels_seen", "input_sets", "l2_policy", "floor_ms", "energy_j",
    "baseline_energy_j", "slowed_samples",
)  # fmt: skip
# Result fields a caller may give (the rest are computed: id, run_id, experiment, point_key, created).
RESULT_FIELDS = (
    "kernel", "m", "n", "k", "block_edge", "dtype", "variant", "backend", "config", "median_ms", "min_ms", "max_ms",
    "reps", "graph_launches", "gflops", "gbytes_per_s", "error", "tolerance", "metric", "baseline_name",
    "baseline_median_ms", "baseline_gflops", "baseline_gbytes_per_s", "ratio_to_baseline", "registers", "smem_bytes",
    "arch", "flush_l2", "sm_clock_after_mhz", "h2d_ms", "d2h_ms", "e2e_gflops", "host_memory", "warnings",
    "source", "timing_method", "baseline_timing_method", *PROFILE_FIELDS, *MEASURE_FIELDS,
)  # fmt: skip
# A failed point's fields (see Store.add_failure): what it was and why it failed.
# ``kind`` is one word: "wrong" (verification), "fault" (the kernel crashed the
# context), "hang" (the watchdog stopped it), "error" (anything else).
FAILURE_FIELDS = (
    "kernel", "m", "n", "k", "block_edge", "dtype", "variant", "backend", "config", "source", "kind", "reason",
)  # fmt: skip
FAILURE_KINDS = ("wrong", "fault", "hang", "error")
# gemmlab stress (gemmlab.studies.stress): a failed draw, with what replays it,
# and a kernel's tally over one stress run (``seeds`` a JSON list, one per
# process; ``load`` the GEMMs the load process finished meanwhile, 0 without one).
STRESS_FAILURE_FIELDS = (
    "kernel", "m", "n", "k", "block_edge", "dtype", "seed", "process", "draw", "max_dim", "kind", "reason",
)  # fmt: skip
STRESS_SUMMARY_FIELDS = (
    "kernel", "launches", "wrong", "faults", "hangs", "errors", "shapes", "processes", "seeds", "load", "seconds",
)  # fmt: skip
# One compile (see Store.add_compiles): which instantiation, for which
# architecture, by which NVRTC, and what ptxas reported (``smem_bytes``: static
# shared memory per block; registers per thread).
COMPILE_FIELDS = (
    "kernel", "block_edge", "dtype", "config", "arch", "nvrtc_version", "registers", "smem_bytes", "stack_bytes",
    "spill_store_bytes", "spill_load_bytes", "barriers",
)  # fmt: skip
# The ptxas figures of a compile, as backends.nvrtc.Resources names them.
COMPILE_RESOURCES = ("registers", "smem_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes", "barriers")
# The tuner's rows: a candidate tried (tuned_candidates; id is computed) and a
# configuration chosen (tuned).
CANDIDATE_FIELDS = (
    "gpu_name", "cc", "kernel", "dtype", "size_class", "m", "n", "k", "config", "status", "median_ms", "gflops",
    "baseline_gflops", "error", "reason", "date",
)  # fmt: skip
TUNED_FIELDS = (
    "gpu_name", "cc", "kernel", "dtype", "size_class", "config", "gflops", "ratio_to_cublas", "default_gflops",
    "shapes", "date",
)  # fmt: skip


def point_key(
    kernel: str, m: int, n: int, k: int, block_edge: int, dtype: str, variant: str = "", *, backend: str,
    config: dict | str | None,
) -> str:  # fmt: skip
    """The identity of a measured point inside an experiment: what ran
    (kernel, backend, configuration) on what (shape, block edge, dtype) and
    what the time covers (variant)."""
    return f"{kernel}|{m}|{n}|{k}|{block_edge}|{dtype}|{variant}|{backend}|{config_text(config)}"


def unrecorded_key(key: str) -> str:
    """The key a row from before schema v5 has for the same point: backend and configuration empty."""
    return "|".join(key.split("|")[:7]) + "||"


def predates_config(row: dict) -> bool:
    """Whether a stored row was measured before results recorded a backend and
    a configuration (schema v5): both are empty. A row that does not come
    from the store (no ``backend`` key at all) is not counted."""
    return row.get("backend") == ""


def result_row(result: Any) -> dict:
    """A RunResult, its ``to_dict()``, or a flat dict of row fields, as a flat row.

    Nested ``timing``, ``baseline_timing`` and ``resources`` (as RunResult has
    them) are flattened to ``median_ms``..., ``baseline_median_ms``,
    ``registers`` and ``smem_bytes``; keys the table has no column for are
    dropped.
    """
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    row: dict[str, Any] = {}
    if timing := data.get("timing"):
        timing = _as_dict(timing)
        row.update({key: timing.get(key) for key in ("median_ms", "min_ms", "max_ms", "reps", "graph_launches")})
        row["timing_method"] = _method(timing)
    if base := data.get("baseline_timing"):
        row["baseline_median_ms"] = _as_dict(base)["median_ms"]
        row["baseline_timing_method"] = _method(_as_dict(base))
    if resources := data.get("resources"):
        resources = _as_dict(resources)
        row.update(registers=resources.get("registers"), smem_bytes=resources.get("smem_bytes"))
    for key in RESULT_FIELDS:
        if key in data and key not in row:
            row[key] = data[key]
    missing = [key for key in ("kernel", "m", "n", "k", "dtype") if row.get(key) is None]
    if missing:
        raise ValueError(f"a result needs {', '.join(missing)}")
    row["block_edge"] = int(row.get("block_edge") or 0)
    row["variant"] = row.get("variant") or ""
    row["backend"] = row.get("backend") or ""
    row["config"] = config_text(row.get("config"))
    row["source"] = row.get("source") or ""
    row["warnings"] = list(row.get("warnings") or [])
    if interval := data.get("ratio_interval"):
        row["ratio_low"], row["ratio_high"] = interval
    if isinstance(row.get("kernels_seen"), list | tuple):
        row["kernels_seen"] = json.dumps(list(row["kernels_seen"]))
    if row.get("flush_l2") is not None:
        row["flush_l2"] = int(bool(row["flush_l2"]))
    return row


def compile_row(result: Any, nvrtc_version: str | None) -> dict | None:
    """The compile behind a result (a RunResult, its ``to_dict()`` or a dict
    with ``resources`` and ``arch``) as a row of :data:`COMPILE_FIELDS`; None
    for a result that ran no compile of gemmlab's (a CPU baseline)."""
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    resources, arch = data.get("resources"), data.get("arch")
    if not resources or not arch:
        return None
    resources = _as_dict(resources)
    row = {key: data[key] for key in ("kernel", "dtype")}
    row.update(block_edge=int(data.get("block_edge") or 0), config=config_text(data.get("config")), arch=arch)
    row.update({key: resources.get(key) for key in COMPILE_RESOURCES}, nvrtc_version=nvrtc_version)
    return row


def _method(timing: dict) -> str:
    """How a timing (as a dict) was taken, in Timing.method's words."""
    kept = {key: timing[key] for key in ("median_ms", "min_ms", "max_ms", "reps") if key in timing}
    repeats = {key: int(timing.get(key) or 0) for key in ("graph_launches", "back_to_back")}
    return Timing(**kept, **repeats).method  # type: ignore[arg-type]


def _as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else vars(value)


def latest_peak_of(peaks: list[dict]) -> dict | None:
    """Of stored peak rows (oldest first, one GPU and element type), the newest
    of each instruction family, then the fastest of those: the GPU's peak."""
    newest = {row["family"]: row for row in peaks}
    return max(newest.values(), key=lambda row: row["gflops"], default=None)
