"""What CUPTI's activity records say about a timed window, on the machine at hand.

A probe for issue 48 (every timed launch answers for itself), run once before
the runner relies on CUPTI: it launches, inside one window between two CUDA
events, a kernel on the timed stream, a kernel on a side stream that outlives
the end event, a kernel from a second thread, a CuPy graph replay and a
device-to-device copy, then prints every record CUPTI gives for them: kernel
and copy start/end, stream, correlation id, the external correlation id pushed
around the window, the launching thread (from the API records), and the
device timestamps of the two events. Then it times a short kernel with and
without the activity kinds enabled (CUPTI's cost to a figure), and reads
NVML's energy counter under load to see how often it moves.

    python3 benchmarks/scripts/cupti_probe.py            (on a GPU machine)
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import threading
import time

import cupy as cp

SPIN = r"""
extern "C" __global__ void probe_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
"""


def main() -> None:
    from cupti import cupti

    report: dict = {"cupti_version": cupti.get_version() if hasattr(cupti, "get_version") else None}
    records: list = []

    def requested():
        return 8 * 1024 * 1024, 0

    def completed(activities):
        for a in activities:
            row = {"kind": int(a.kind)}
            for field in ("name", "start", "end", "stream_id", "correlation_id", "thread_id", "cbid", "external_id",
                          "external_kind", "device_timestamp", "graph_id", "bytes", "copy_kind"):  # fmt: skip
                if hasattr(a, field):
                    try:
                        row[field] = getattr(a, field)
                    except Exception as exc:
                        row[field] = f"error {exc}"
            records.append(row)

    kinds = [
        cupti.ActivityKind.CONCURRENT_KERNEL,
        cupti.ActivityKind.RUNTIME,
        cupti.ActivityKind.DRIVER,
        cupti.ActivityKind.EXTERNAL_CORRELATION,
        cupti.ActivityKind.MEMCPY,
        cupti.ActivityKind.MEMSET,
        cupti.ActivityKind.CUDA_EVENT,
    ]
    enabled = []
    for kind in kinds:
        try:
            cupti.activity_enable(kind)
            enabled.append(kind.name)
        except Exception as exc:
            report[f"enable {kind.name}"] = repr(exc)
    try:
        cupti.activity_enable_cuda_event_device_timestamps(1)
        report["event_device_timestamps"] = "on"
    except Exception as exc:
        report["event_device_timestamps"] = repr(exc)
    report["enabled"] = enabled
    cupti.activity_register_callbacks(requested, completed)

    spin = cp.RawKernel(SPIN, "probe_spin")
    stream = cp.cuda.Stream(non_blocking=True)
    side = cp.cuda.Stream(non_blocking=True)
    a = cp.random.rand(1 << 20, dtype=cp.float32)
    b = cp.empty_like(a)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    # A graph of two small kernels, captured before the window.
    stream.begin_capture()
    with stream:
        cp.add(a, a, out=b)
        cp.multiply(a, a, out=b)
    graph = stream.end_capture()
    stream.synchronize()

    def other_thread() -> None:
        with cp.cuda.Stream(non_blocking=True) as mine:
            spin((1,), (1,), (cp.uint64(50_000),), stream=mine)

    ext = cupti.ExternalCorrelationKind.CUSTOM0
    spin((1,), (1,), (cp.uint64(300_000),), stream=stream)  # the runner's hold
    start.record(stream)
    cupti.activity_push_external_correlation_id(ext, 4242)
    with stream:
        cp.add(a, a, out=b)  # the kernel's own launch
    spin((1,), (1,), (cp.uint64(2_000_000),), stream=side)  # outlives the end event
    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    graph.launch(stream)
    b.data.copy_from_device_async(a.data, a.nbytes, stream=stream)
    cupti.activity_pop_external_correlation_id(ext)
    end.record(stream)
    end.synchronize()
    report["events_ms"] = cp.cuda.get_elapsed_time(start, end)
    cp.cuda.runtime.deviceSynchronize()
    cupti.activity_flush_all(1)
    report["main_thread"] = threading.get_native_id()
    report["records"] = [r for r in records if r["kind"] != int(cupti.ActivityKind.DRIVER) or r.get("correlation_id")]
    report["record_count"] = len(records)

    # CUPTI's cost to a short kernel's events: 300 samples each way, alternated in blocks.
    def sample() -> float:
        spin((1,), (1,), (cp.uint64(100_000),), stream=stream)
        start.record(stream)
        with stream:
            cp.multiply(a, a, out=b)
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e3

    costs: dict[str, list[float]] = {"on": [], "off": []}
    for block in range(6):
        state = "on" if block % 2 == 0 else "off"
        if state == "off":
            cupti.activity_flush_all(1)
            for kind in kinds:
                try:
                    cupti.activity_disable(kind)
                except Exception:
                    pass
        else:
            for kind in kinds:
                try:
                    cupti.activity_enable(kind)
                except Exception:
                    pass
        costs[state] += [sample() for _ in range(100)]
        records.clear()
    report["short_kernel_us"] = {k: statistics.median(v) for k, v in costs.items()}

    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        readings = []
        big = cp.random.rand(4096, 4096, dtype=cp.float32)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.5:
            big @ big
            cp.cuda.runtime.deviceSynchronize()
            readings.append((time.perf_counter() - t0, pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)))
        changes = [t for (t, e), (_, e0) in zip(readings[1:], readings[:-1], strict=False) if e != e0]
        gaps = [b - a for a, b in itertools.pairwise(changes)]
        report["energy"] = {"readings": len(readings), "changes": len(changes),
                            "median_gap_ms": statistics.median(gaps) * 1e3 if gaps else None,
                            "mJ_over_0.5s": readings[-1][1] - readings[0][1]}  # fmt: skip
    except Exception as exc:
        report["energy"] = repr(exc)
    json.dump(report, sys.stdout, indent=1, default=str)


if __name__ == "__main__":
    main()
