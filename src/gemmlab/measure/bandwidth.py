"""The memory lab's ceiling and table: the device-to-device copy rate, the
datasheet figure, and each kernel's share of both."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    pass


def measure_copy_ceiling(nbytes: int = 4 * 2**30, reps: int = 20, device_index: int = 0) -> float:
    """The device-to-device copy rate in GB/s, bytes read + written (2 x nbytes per copy).

    A cudaMemcpy of ``nbytes`` (cut to what fits in free memory, two buffers
    and headroom) is timed with CUDA events, ``reps`` times after a warm-up;
    the median is returned. This is the practical ceiling a memory-bound kernel
    can reach, usually well under the datasheet figure.
    """
    from gemmlab.core import gpu
    from gemmlab.core.timing import Timing, gbytes_per_s

    cp = gpu.cupy()
    free = gpu.describe(device_index).free_bytes
    size = min(nbytes, (free - gpu.MEMORY_HEADROOM) // 2) // 256 * 256
    if size <= 0 or reps < 1:
        raise ValueError(f"nothing to time: {size} bytes fit in free memory, {reps} repetitions asked")
    with cp.cuda.Device(device_index):
        src = cp.empty(size, dtype=cp.uint8)
        dst = cp.empty_like(src)
        src.fill(1)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        samples = []
        for i in range(reps + 1):
            start.record()
            dst.data.copy_from_device_async(src.data, size)
            end.record()
            end.synchronize()
            if i:  # the first copy is the warm-up
                samples.append(cp.cuda.get_elapsed_time(start, end))
    return gbytes_per_s(2 * size, Timing.of(samples).median_ms)


def datasheet_bandwidth(device_index: int = 0) -> float | None:
    """The memory bandwidth the clocks and bus width promise, in GB/s (None if unreadable)."""
    from gemmlab.core import gpu

    return gpu.describe(device_index).peak_bandwidth_gbs


class BandwidthResult(Protocol):
    """What :func:`bandwidth_table` reads from a result (a :class:`~gemmlab.measure.run.RunResult` fits)."""

    kernel: str
    m: int
    n: int
    block_edge: int
    dtype: str
    gbytes_per_s: float


def bandwidth_table(results: Iterable[BandwidthResult], ceiling_gbs: float, datasheet_gbs: float | None) -> list[dict]:
    """One row per result: its GB/s, and that as a fraction of the measured copy
    ceiling and of the datasheet bandwidth (None when the datasheet figure is)."""
    if not ceiling_gbs > 0:
        raise ValueError(f"the copy ceiling must be positive, got {ceiling_gbs}")
    return [
        {
            "kernel": r.kernel,
            "shape": f"{r.m}x{r.n}",
            "block_edge": r.block_edge,
            "dtype": r.dtype,
            "gbytes_per_s": r.gbytes_per_s,
            "fraction_of_ceiling": r.gbytes_per_s / ceiling_gbs,
            "fraction_of_datasheet": r.gbytes_per_s / datasheet_gbs if datasheet_gbs else None,
        }
        for r in results
    ]
