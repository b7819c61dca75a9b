"""A Python submission measured at arm's length: its code runs in a child
process, and the clock, the inputs, the reference and the verdict stay here.

Why: a Python kernel (gemmlab.backends.python) is imported into the process
that calls it, and code in a process can change anything in that process:
rebind ``time.perf_counter`` or CuPy's event timer, replace gemmlab's checks,
hand back a result it made up. For grading that is not acceptable, so this
module splits the work between two processes:

- *here* (the trusted side, which never imports the submission): the inputs
  are drawn, the float64 reference is computed and kept, the output is
  poisoned, the clock (this process's ``time.perf_counter``) is read, and the
  output is checked;
- *the child* (:class:`gemmlab.measure.watchdog.Worker`, a spawned process,
  started in a fresh empty folder): imports the submission and, when asked,
  calls it on every *slot* (a set of A, B and C this side shares with it) and
  waits for the GPU. Its only channel back is the watchdog's pipe, and what it
  sends is "done" or an error; no figure it computes is believed.

Every launch of a timed batch has a slot of its own, with inputs drawn afresh
for the batch: an answer kept from an earlier call is wrong for the new
inputs, and a launch skipped leaves its C poisoned, so both fail the check
that follows every batch. A batch's time is this side's clock from asking
the child to its reply, less the round trip of a child that launches
nothing, measured *before the submission is imported* (so no code of the
submission's can lengthen what is subtracted), over the launches.

The clock stops at the reply only if the work is done by then: the check
right after it reads every C. A C still unfinished there that is found
right a moment later means the child answered before its work ended (a
submission that replaced the child's synchronisation); that is refused,
never timed.

The library (cuBLAS) is timed once the child is gone, every process of its
group ended (``Worker.close``), on the same shapes and fresh inputs, by the
same clock: nothing of the submission's can hold the GPU while it runs.

Two kinds of memory: ``device`` (CuPy arrays in cudaMalloc'd blocks, shared
through CUDA IPC handles) for grading on the GPU, and ``host`` (NumPy arrays
in POSIX shared memory, the library NumPy's matmul) so that the protocol, and
what it stops, can be tested without a GPU. A host submission's function is
handed NumPy arrays whatever its declaration's ``arrays`` says.

docs/grading.md states what this prevents and what it does not.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gemmlab.core.dtypes import SAME_TYPE_C_TOLERANCE, TOLERANCE
from gemmlab.core.errors import GemmlabError, VerificationError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import Timing
from gemmlab.measure import watchdog
from gemmlab.problems.base import poison, poison_left, random_matrix, relative_error

HOST, DEVICE = "host", "device"
MEMORIES = (HOST, DEVICE)
# Environment variables the child does not inherit: ones that could name the
# grader's files (gemmlab's own settings) or its Dask scheduler.
PRIVATE_PREFIXES = ("GEMMLAB_", "DASK_")
# Seconds the child may take to import the submission.
LOAD_LIMIT_S = 120.0


@dataclass
class ApartTiming:
    """What one point measured at arm's length came to."""

    timing: Timing | None  # per launch, one sample per batch; None when only checked
    baseline_timing: Timing | None
    error: float  # the largest relative error over every checked launch
    tolerance: float
    launches: int  # launches checked


# -- the shared slots ---------------------------------------------------------


@dataclass
class _Shared:
    """One array this side owns and the child opens: ``handle`` is what crosses."""

    array: Any
    handle: Any
    keep: Any  # what must live as long as the array (the allocation)


def _host_shared(shape: tuple[int, int], dtype: str) -> _Shared:
    from multiprocessing import shared_memory

    import numpy as np

    nbytes = max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize)
    block = shared_memory.SharedMemory(create=True, size=nbytes)
    array = np.ndarray(shape, dtype=dtype, buffer=block.buf)
    return _Shared(array, (block.name, shape, dtype), block)


def _device_shared(shape: tuple[int, int], dtype: str) -> _Shared:
    import cupy as cp

    nbytes = max(1, shape[0] * shape[1] * cp.dtype(dtype).itemsize)
    # A cudaMalloc of its own, not a block of CuPy's pool: an IPC handle names a
    # whole allocation, and the child maps it from its start.
    memory = cp.cuda.Memory(nbytes)
    array = cp.ndarray(shape, dtype=dtype, memptr=cp.cuda.MemoryPointer(memory, 0))
    return _Shared(array, (cp.cuda.runtime.ipcGetMemHandle(memory.ptr), shape, dtype, nbytes), memory)


def _release(shared: _Shared) -> None:
    if hasattr(shared.keep, "unlink"):  # host: the shared-memory block
        shared.array = None
        shared.keep.close()
        shared.keep.unlink()


@dataclass
class _Slots:
    """``count`` sets of A, B, C shared with the child, and this side's references."""

    memory: str
    shape: Shape
    dtype: str
    count: int
    seed: int | None
    shared: list[dict[str, _Shared]] = field(default_factory=list)
    references: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        make = _device_shared if self.memory == DEVICE else _host_shared
        s = self.shape
        sides = {"A": (s.m, s.k), "B": (s.k, s.n), "C": (s.m, s.n)}
        self.shared = [{name: make(side, self.dtype) for name, side in sides.items()} for _ in range(self.count)]
        self.xp = _xp(self.memory)
        self.rng = self.xp.random.default_rng(self.seed)

    def handles(self) -> list[dict[str, Any]]:
        return [{name: shared.handle for name, shared in slot.items()} for slot in self.shared]

    def refill(self) -> None:
        """Fresh inputs in every slot, their float64 products kept here, every C poisoned."""
        xp, s = self.xp, self.shape
        self.references = []
        for slot in self.shared:
            a, b = random_matrix(xp, self.rng, s.m, s.k, self.dtype), random_matrix(xp, self.rng, s.k, s.n, self.dtype)
            slot["A"].array[...], slot["B"].array[...] = a, b
            self.references.append(a.astype(xp.float64) @ b.astype(xp.float64))
            poison(xp, slot["C"].array, self.dtype)
        _synchronize(self.memory)

    def errors(self) -> list[float]:
        """Each slot's relative error now (NaN where poison is left)."""
        return [relative_error(self.xp, slot["C"].array, reference)
                for slot, reference in zip(self.shared, self.references, strict=True)]  # fmt: skip

    def checked(self, tolerance: float, errors: list[float] | None = None) -> float:
        """The largest relative error over the slots; VerificationError for the first slot over ``tolerance``."""
        worst = 0.0
        for i, (slot, error) in enumerate(zip(self.shared, errors or self.errors(), strict=True)):
            out = slot["C"].array
            if not error <= tolerance:  # NaN (poison left) fails too
                why = poison_left(self.xp, out) or "the values are wrong for the inputs of this call"
                raise VerificationError(
                    f"launch {i + 1} of {self.count} (fresh inputs, checked by the grader): relative error "
                    f"{error:.3g} over the tolerance {tolerance:.1g}: {why}.",
                    "Compute C = A @ B from the A and B of each call, into the C given, and return only once "
                    "the work is done; an answer kept from an earlier call is wrong for new inputs.",
                )
            worst = max(worst, error)
        return worst

    def release(self) -> None:
        for slot in self.shared:
            for shared in slot.values():
                _release(shared)
        self.shared = []


def _xp(memory: str) -> Any:
    if memory == DEVICE:
        import cupy

        return cupy
    import numpy

    return numpy


def _synchronize(memory: str) -> None:
    if memory == DEVICE:
        import cupy as cp

        cp.cuda.runtime.deviceSynchronize()


def _library(slots: _Slots) -> Callable[[int], None]:
    """The library doing slot ``i``'s work (NumPy's matmul on the host; cuBLAS
    through CuPy's matmul on the GPU) into an output of its own."""
    xp = slots.xp
    outs = [xp.empty_like(slot["C"].array) for slot in slots.shared]

    def call(i: int) -> None:
        xp.matmul(slots.shared[i]["A"].array, slots.shared[i]["B"].array, out=outs[i])

    return call


# -- this side ----------------------------------------------------------------


def measure_apart(
    kernel: str, shape: Shape, dtype: str, *, memory: str = DEVICE, batches: int = 3, launches: int = 4,
    baseline: bool = True, limit_s: float = watchdog.FLOOR_S, seed: int | None = None,
) -> ApartTiming:  # fmt: skip
    """Check and time the Python kernel in the file ``kernel`` at ``shape``:
    ``batches`` batches of ``launches`` launches, each launch on fresh inputs of
    its own and checked here (see the module's docstring). ``batches`` = 0:
    check one batch, time nothing. Raises VerificationError for a wrong
    answer, the child's GemmlabError for a submission that fails to load or
    raises, KernelStopped for one that faults or hangs past ``limit_s``."""
    if memory not in MEMORIES:
        raise ValueError(f"memory is one of {MEMORIES}, not {memory!r}")
    tolerance = SAME_TYPE_C_TOLERANCE.get(dtype, TOLERANCE[dtype])
    slots = _Slots(memory, shape, dtype, launches, seed)
    home = tempfile.mkdtemp(prefix="gemmlab-submission-")
    try:
        with watchdog.Worker() as child:
            idle = _calibrated(child, kernel, memory, limit_s)
            child.call(f"{kernel} (import)", LOAD_LIMIT_S, child_load, kernel, memory, private_environment(), home)
            child.call(f"{kernel} (open)", limit_s, child_open, slots.handles(), memory)
            samples, error = _batches(child, slots, kernel, batches, tolerance, limit_s, idle)
        # The child and its process group are gone: the library has the GPU to itself.
        timed = batches > 0
        library = _library_series(slots, batches) if timed and baseline else []
        return ApartTiming(
            timing=Timing.of(samples) if timed else None,
            baseline_timing=Timing.of(library) if library else None,
            error=error,
            tolerance=tolerance,
            launches=slots.count * max(1, batches),
        )
    finally:
        slots.release()
        shutil.rmtree(home, ignore_errors=True)  # the child and all it started are gone: nothing writes there


# Round trips of an empty call timed before the submission is imported; the
# median is what each batch's time is reduced by.
CALIBRATION_TRIPS = 7
# After a reply, how long the check goes on looking at a C found unfinished,
# to tell a child that answered early (refused) from a wrong answer.
EARLY_WINDOW_S = 1.0


def _calibrated(child: watchdog.Worker, kernel: str, memory: str, limit_s: float) -> float:
    """The child's round trip with nothing of the submission's in it: the
    median of CALIBRATION_TRIPS empty calls (after one that warms the pipe and
    the GPU's context), seconds."""
    _round_trip(child, f"{kernel} (calibration)", limit_s, child_ping, memory)
    trips = sorted(_round_trip(child, f"{kernel} (calibration)", limit_s, child_ping, memory)
                   for _ in range(CALIBRATION_TRIPS))  # fmt: skip
    return trips[len(trips) // 2]


def _batches(child: watchdog.Worker, slots: _Slots, kernel: str, batches: int, tolerance: float, limit_s: float,
             idle: float) -> tuple[list[float], float]:  # fmt: skip
    samples, error = [], 0.0
    for batch in range(max(1, batches)):
        slots.refill()
        # The label names no shape: a hidden shape stays hidden in a hang's reason.
        elapsed = _round_trip(child, f"{kernel} (batch {batch + 1})", limit_s, child_launch)
        error = max(error, _done_at_reply(slots, tolerance))
        samples.append(max(elapsed - idle, 0.0) * 1e3 / slots.count)
    return samples, error


def _done_at_reply(slots: _Slots, tolerance: float) -> float:
    """The check right after a reply: every C right. A C wrong then but right
    within EARLY_WINDOW_S means the child answered before its work ended:
    VerificationError saying so; a C that stays wrong is the usual error."""
    errors = slots.errors()
    if all(e <= tolerance for e in errors):
        return max(errors)
    deadline = time.perf_counter() + EARLY_WINDOW_S
    while time.perf_counter() < deadline:
        time.sleep(0.002)
        later = slots.errors()
        if all(e <= tolerance for e in later):
            raise VerificationError(
                "the submission answered before its GPU work had ended: C was unfinished when its call returned "
                "and right a moment later, so the time it would get is not the time its work took.",
                "Return from the function only once the work is done; do not replace or skip the grader's "
                "synchronisation.",
            )
    return slots.checked(tolerance, errors)


def _round_trip(child: watchdog.Worker, label: str, limit_s: float, fn: Callable[..., Any], *args: Any) -> float:
    """Seconds, by this process's clock, from asking the child to its answer."""
    start = time.perf_counter()
    child.call(label, limit_s, fn, *args)
    return time.perf_counter() - start


def _library_series(slots: _Slots, batches: int) -> list[float]:
    """The library on the slots' shapes, ``batches`` batches of fresh inputs, ms per launch."""
    library = _library(slots)
    samples = []
    for _ in range(batches):
        slots.refill()
        _synchronize(slots.memory)
        start = time.perf_counter()
        for i in range(slots.count):
            library(i)
        _synchronize(slots.memory)
        samples.append((time.perf_counter() - start) * 1e3 / slots.count)
    return samples


def run_apart(
    kernel: str, shape: Shape, dtype: str, *, batches: int, launches: int, limit_s: float,
    memory: str = DEVICE,
) -> Any:  # fmt: skip
    """:func:`measure_apart` as a RunResult, as a sweep's point is stored (the
    kernel's registers and launch geometry unknown: they are the child's)."""
    from gemmlab.backends.python import UNKNOWN
    from gemmlab.core.environment import host_record
    from gemmlab.core.timing import gflops
    from gemmlab.measure.run import RunResult

    measured = measure_apart(kernel, shape, dtype, memory=memory, batches=batches, launches=launches,
                             limit_s=limit_s)  # fmt: skip
    timing = measured.timing or Timing.of([0.0])
    device: dict = {}
    if memory == DEVICE:
        from gemmlab.core import gpu

        device = gpu.describe(0).to_dict()
    flops = 2 * shape.m * shape.n * shape.k
    result = RunResult(
        kernel=f"{Path(kernel).resolve().parent.name}/{Path(kernel).stem}", m=shape.m, n=shape.n, k=shape.k,
        block_edge=0, dtype=dtype, grid=(0, 0, 0), block=(0, 0, 0), dynamic_smem=0, resources=UNKNOWN, arch="",
        timing=timing, gflops=gflops(flops, timing.median_ms) if timing.median_ms > 0 else 0.0,
        gbytes_per_s=0.0, error=measured.error, tolerance=measured.tolerance, backend="python",
        source=str(kernel), device=device, host=host_record(),
        warnings=["timed at arm's length: the grader's clock around the submission's process, per batch of "
                  f"{launches} launches on fresh inputs (gemmlab.measure.apart)"],
    )  # fmt: skip
    base = measured.baseline_timing
    if base is not None and timing.median_ms > 0:
        result.baseline_name = "cuBLAS (CuPy matmul)" if memory == DEVICE else "NumPy matmul"
        result.baseline_timing = base
        result.baseline_gflops = gflops(flops, base.median_ms)
        result.ratio_to_baseline = base.median_ms / timing.median_ms
    return result


def private_environment() -> list[str]:
    """The names of this process's environment variables the child drops."""
    return sorted(name for name in os.environ if name.startswith(PRIVATE_PREFIXES))


# -- the child ----------------------------------------------------------------

# What the child holds between calls: the submission, its arrays, how to call it.
_CHILD: dict[str, Any] = {}


def child_load(kernel: str, memory: str, drop: list[str], home: str) -> None:
    """In the child: move into ``home``, an empty folder made for it (a relative
    path reaches nothing of the grader's), which is also its HOME and its
    temporary folder; forget the grader's settings; import the submission.
    The synchronisation it will use is taken before the import."""
    for name in drop:
        os.environ.pop(name, None)
    os.environ.update(HOME=home, TMPDIR=home, TMP=home, TEMP=home)
    tempfile.tempdir = None  # read TMPDIR again
    os.chdir(home)
    _CHILD["synchronize"] = _synchronizer(memory)
    from gemmlab.kernels import callables

    spec = callables.load(Path(kernel))
    _CHILD.update(spec=spec, memory=memory, keywords=spec.values(spec.default_block_edge()))


def _synchronizer(memory: str) -> Callable[[], None]:
    if memory != DEVICE:
        return lambda: None
    import cupy as cp

    return cp.cuda.runtime.deviceSynchronize


def child_open(handles: list[dict[str, Any]], memory: str) -> None:
    """In the child: map every slot's arrays, and make them the kind the function takes."""
    opened = [{name: _open(handle, memory) for name, handle in slot.items()} for slot in handles]
    spec = _CHILD["spec"]
    if memory == DEVICE:
        import cupy as cp

        from gemmlab.backends.python import CALLERS

        stream = cp.cuda.Stream(non_blocking=True)
        caller = CALLERS[spec.arrays](stream, 0)
        _CHILD["call"] = caller.call
        _CHILD["slots"] = [caller.convert(slot[n] for n in ("A", "B", "C")) for slot in opened]
    else:
        _CHILD["call"] = lambda function, arrays, keywords: function(*arrays, **keywords)
        _CHILD["slots"] = [[slot[n] for n in ("A", "B", "C")] for slot in opened]
    _CHILD["opened"] = opened


def _open(handle: Any, memory: str) -> Any:
    if memory == DEVICE:
        import cupy as cp

        ipc, shape, dtype, nbytes = handle
        pointer = cp.cuda.runtime.ipcOpenMemHandle(ipc)
        owned = cp.cuda.UnownedMemory(pointer, nbytes, owner=None)
        return cp.ndarray(shape, dtype=dtype, memptr=cp.cuda.MemoryPointer(owned, 0))
    from multiprocessing import shared_memory

    import numpy as np

    name, shape, dtype = handle
    # A spawned child shares its parent's resource tracker, so attaching here
    # registers nothing new: the block stays this side's to unlink.
    block = shared_memory.SharedMemory(name=name)
    _CHILD.setdefault("blocks", []).append(block)
    return np.ndarray(shape, dtype=dtype, buffer=block.buf)


def child_launch() -> None:
    """In the child: the function once on every slot, then wait for the GPU."""
    from gemmlab.kernels.callables import call_error

    spec, call, keywords = _CHILD["spec"], _CHILD["call"], _CHILD["keywords"]
    for arrays in _CHILD["slots"]:
        try:
            call(spec.callable, arrays, keywords)
        except GemmlabError:
            raise
        except Exception as exc:
            raise call_error(spec, exc, keywords) from None
    _CHILD["synchronize"]()


def child_ping(memory: str) -> None:
    """In the child, before the submission is imported: an answer after the
    same synchronisation a launch ends with, to time the round trip alone."""
    _synchronizer(memory)()
