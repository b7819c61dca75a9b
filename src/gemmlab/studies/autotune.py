"""Autotuning on first call (``gemmlab.matmul(..., autotune=True)``): a shape
with no pick of its own on this GPU has the cost model's few best candidates
(:func:`gemmlab.studies.dispatch.model_ranked`) compiled, verified and timed
here, and the fastest verified one stored as the shape's pick, so that this
call and every later one (in any process reading the same database) runs it.

The candidates go through the dispatcher's runner (verified against a float64
reference before and after timing); cuBLAS is not timed beside them, to keep a
first call to a few seconds, so the pick stored has no cuBLAS time
(``gemmlab dispatch show`` prints "-" there). ``gemmlab dispatch tune`` times
cuBLAS beside every candidate.
"""

from __future__ import annotations

from collections.abc import Sequence

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.spec import KernelSpec
from gemmlab.store.records import Pick
from gemmlab.store.store import Store
from gemmlab.studies.candidates import Device, Runner
from gemmlab.studies.costmodel import Calibration, GPUModel
from gemmlab.studies.dispatch import EXPERIMENT, model_ranked, resident
from gemmlab.studies.dispatch_tuning import DispatchSummary, compile_candidates, store_pick, time_candidates

# The model's best candidates timed on a first call: enough to cover its usual
# misses (its first choice among measured configurations was within 5% of the
# fastest in 49 of 66 groups, benchmarks/results/2026-11-29_model-regret.txt),
# few enough that a first call takes seconds.
TOP = 4
REPS = 10
MAX_SECONDS = 2.0


def autotune_shape(
    store: Store, shape: Shape, dtype: str, device: Device, picks: Sequence[Pick], *,
    calibration: Calibration | None = None, top: int = TOP, runner: Runner | None = None,
    run_record: dict | None = None, device_index: int = 0,
) -> Pick:  # fmt: skip
    """Time the model's ``top`` candidates for ``shape`` on ``device`` and store
    the fastest verified one as its pick in ``store``; the pick. ``picks``:
    this GPU's picks, which correct the model. A GemmlabError naming every
    candidate's failure when none verifies."""
    model = device.model or GPUModel.assumed(device.sms)
    calibration = calibration or Calibration.of(picks, model, resident)
    ranked = model_ranked(shape, dtype, device.arch, model, calibration, picks)[:top]
    found = [r.candidate for r in ranked]
    if not found:
        raise GemmlabError(f"No rung of gemmlab takes {shape} in {dtype}: nothing to autotune.",
                           "Pad the matrices to a shape a rung takes, or use cuBLAS for this one.")  # fmt: skip
    if runner is None:
        compile_candidates(found, shape, dtype, device.arch)
        runner = _on_device(device_index)
    summary = DispatchSummary(device.name, device.cc)
    results = time_candidates(found, shape, dtype, REPS, MAX_SECONDS, runner, summary, None, None)
    if not results:
        failures = "; ".join(f"{label}: {why}" for label, why in summary.rejected + summary.skipped + summary.failed)
        raise GemmlabError(
            f"Autotuning {shape} in {dtype}: none of the model's {len(found)} best candidates verified ({failures}).",
            "Call without autotune=True (the model's choice runs), and report the failures above.",
        )
    run_id = store.start_run({**(run_record or {}), "gpu_name": device.name, "cc": device.cc})
    store.add_results(run_id, EXPERIMENT, [r for _, r in results])
    return store_pick(store, run_id, device, shape, dtype, results)


def _on_device(device_index: int) -> Runner:
    """The dispatcher's runner on GPU ``device_index``, cuBLAS left out."""
    from gemmlab.measure.run import run

    def runner(
        spec: KernelSpec, shape: Shape, *, dtype: str, reps: int, warmup: int, max_seconds: float, baseline: bool
    ):  # fmt: skip
        return run(spec.id, shape, dtype=dtype, spec=spec, reps=reps, warmup=warmup, max_seconds=max_seconds,
                   baseline=False, device_index=device_index)  # fmt: skip

    return runner
