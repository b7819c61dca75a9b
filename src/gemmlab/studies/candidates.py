"""What the two tuners share: the GPU their results are filed under, and the
runner that verifies and times one candidate configuration.

:mod:`gemmlab.studies.tune` (a rung's configurations per size class) and
:mod:`gemmlab.studies.dispatch` (the dispatcher's picks per shape) both hand a
candidate's own catalogue entry to a runner and read a
:class:`~gemmlab.measure.run.RunResult` back; a test hands them a fake runner
instead, and a user's kernel is measured through one that calls the watchdog's
worker (``tune._watched_runner``). How the answer is stored, and whether cuBLAS
is timed beside every candidate, is each tuner's own policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from gemmlab.core.shapes import Shape
from gemmlab.kernels.spec import KernelSpec
from gemmlab.studies.costmodel import GPUModel

if TYPE_CHECKING:
    from gemmlab.measure.run import RunResult


class Device(NamedTuple):
    """The GPU a tuning ran on: its name and compute capability file the results
    (tuned configurations, picks), its architecture and SMs prune the dispatcher's
    candidates."""

    name: str
    cc: str  # "9.0"
    arch: str  # "sm_90a"
    sms: int
    model: GPUModel | None = None  # its figures for the dispatcher's cost model (None: an H100's, with these SMs)


def current_device(device_index: int = 0) -> Device:
    """The GPU at ``device_index``, as the tuners file their results under it."""
    from gemmlab.core import gpu

    info = gpu.describe(device_index)
    return Device(info.name, f"{info.cc[0]}.{info.cc[1]}", info.arch, info.sm_count, GPUModel.of(info))


class Runner(Protocol):
    """Verifies and times one candidate (``spec``, the configuration's own
    entry) at ``shape``; ``baseline``: time cuBLAS beside it. Raises the
    typed errors the tuners sort candidates by: VerificationError or
    KernelStopped (rejected), CompileError, DeviceLimitError or
    ConstraintError (skipped)."""

    def __call__(
        self, spec: KernelSpec, shape: Shape, *, dtype: str, reps: int, warmup: int, max_seconds: float,
        baseline: bool,
    ) -> RunResult: ...  # fmt: skip


def measure_candidate(
    spec: KernelSpec, shape: Shape, *, dtype: str, reps: int, warmup: int, max_seconds: float, baseline: bool
) -> RunResult:
    """The default runner: :func:`gemmlab.measure.run.run` on the candidate's own entry."""
    from gemmlab.measure.run import run

    return run(spec.id, shape, dtype=dtype, spec=spec, reps=reps, warmup=warmup, max_seconds=max_seconds,
               baseline=baseline)  # fmt: skip
