"""Everything that asks the driver about the GPU. Kept small: the rest of
gemmlab takes plain values from here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from dataclasses import asdict, dataclass
from typing import Any

from gemmlab.core.errors import NoGPUError

# What a machine with no NVIDIA driver or GPU can still do, one command each, as
# the user would type it; the no-GPU message lists them and tests/test_error_messages.py
# runs each one without a GPU, so the list cannot promise what does not work.
WORKS_WITHOUT_GPU = (
    "gemmlab kernels",
    "gemmlab compile tiled --arch sm_90a",
    "gemmlab occupancy tiled --arch sm_90a",
    "gemmlab occupancy --cc 9.0 --threads 256 --regs 32",
    "gemmlab reproduce --list",
    "gemmlab report --db results.sqlite --out report",
)
NO_GPU_FIX = "Commands that work without a GPU: " + ", ".join(f"`{c}`" for c in WORKS_WITHOUT_GPU) + "."

# The oldest driver release for each CUDA major version (CUDA Toolkit release
# notes, "CUDA Toolkit and Corresponding Driver Versions"): with minor-version
# compatibility, a driver of a major's first release runs all its minors.
MIN_DRIVER_RELEASE = {11: "R450", 12: "R525", 13: "R580"}

# Device memory a point's own buffers must leave free, for CuPy's pool, cuBLAS's
# workspace and the driver.
MEMORY_HEADROOM = 512 * 2**20

# FP32 lanes per SM by compute capability (CUDA C Programming Guide,
# "Arithmetic Instructions" throughput table: 32-bit fadd/fmul/ffma per clock per SM).
FP32_LANES_PER_SM = {
    (1, 0): 8, (1, 1): 8, (1, 2): 8, (1, 3): 8, (2, 0): 32, (2, 1): 48,
    (3, 0): 192, (3, 2): 192, (3, 5): 192, (3, 7): 192, (5, 0): 128, (5, 2): 128, (5, 3): 128,
    (6, 0): 64, (6, 1): 128, (6, 2): 128, (7, 0): 64, (7, 2): 64, (7, 5): 64,
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128,
    (10, 0): 128, (10, 3): 128, (11, 0): 128, (12, 0): 128, (12, 1): 128,
}  # fmt: skip


# Dense tensor-core FLOPs per SM per clock, by compute capability and input
# type (FP32 accumulation): 4 tensor cores per SM, each 512 (sm_90) or 256
# (sm_80) FP16 multiply-adds per clock, tf32 at half that. They reproduce the
# datasheets: A100 312 TFLOP/s BF16 = 108 SMs x 2048 x 1.41 GHz; H100 SXM 989
# = 132 x 4096 x 1.83 GHz.
# 8-bit inputs run at twice the 16-bit rate where the tensor cores take them
# (int8 from sm_80, FP8 on sm_90, one rate for every FP8 pair: H100 SXM 1979
# TFLOP/s / TOPS dense); an int8 "FLOP" is one of the two operations of an
# integer multiply-add.
TENSOR_FLOPS_PER_SM_CLOCK = {
    (8, 0): {"bfloat16": 2048, "float16": 2048, "tf32": 1024, "int8": 4096},
    (9, 0): {
        "bfloat16": 4096,
        "float16": 4096,
        "tf32": 2048,
        "int8": 8192,
        "e4m3": 8192,
        "e5m2": 8192,
        "e5m2xe4m3": 8192,
    },
}


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    cc: tuple[int, int]
    sm_count: int
    memory_bytes: int
    free_bytes: int
    sm_clock_mhz: float | None
    memory_clock_mhz: float | None
    memory_bus_bits: int | None
    l2_bytes: int
    max_threads_per_block: int
    max_smem_per_block: int  # default (48 KB)
    max_smem_per_block_optin: int
    driver_version: str
    runtime_version: str

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def peak_fp32_gflops(self) -> float | None:
        return self.fp32_gflops_at()

    def fp32_gflops_at(self, clock_mhz: float | None = None) -> float | None:
        """The FP32 lanes' peak at ``clock_mhz`` (default: the boost clock), or
        None where the lanes per SM are not known."""
        lanes = FP32_LANES_PER_SM.get(self.cc)
        clock = clock_mhz or self.sm_clock_mhz
        if lanes is None or not clock:
            return None
        return 2 * lanes * self.sm_count * clock / 1e3  # one FMA = 2 FLOPs

    def peak_tensor_gflops(self, dtype: str, clock_mhz: float | None = None) -> float | None:
        """Dense tensor-core peak for ``dtype`` at ``clock_mhz`` (default: the
        boost clock), or None where the rate is not known."""
        rate = TENSOR_FLOPS_PER_SM_CLOCK.get(self.cc, {}).get(dtype)
        clock = clock_mhz or self.sm_clock_mhz
        if rate is None or not clock:
            return None
        return rate * self.sm_count * clock / 1e3

    @property
    def peak_bandwidth_gbs(self) -> float | None:
        if not self.memory_clock_mhz or not self.memory_bus_bits:
            return None
        # Double data rate: two transfers per memory clock.
        return 2 * self.memory_clock_mhz * 1e6 * self.memory_bus_bits / 8 / 1e9

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(arch=self.arch, peak_fp32_gflops=self.peak_fp32_gflops, peak_bandwidth_gbs=self.peak_bandwidth_gbs)
        d["cc"] = f"{self.cc[0]}.{self.cc[1]}"
        return d


def _version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


@functools.cache
def _cupy():
    """Import CuPy and make sure a driver and a GPU are there."""
    try:
        import cupy
    except Exception as exc:
        raise NoGPUError(f"CuPy could not be loaded ({exc}).", NO_GPU_FIX) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        runtime = _try(cupy.cuda.runtime.runtimeGetVersion)
        raise no_usable_gpu(exc, installed_driver(), runtime, _try(_driver_release)) from None
    if count == 0:
        raise NoGPUError("The NVIDIA driver reports no GPU.", NO_GPU_FIX)
    return cupy


def installed_driver() -> int | None:
    """The CUDA version the installed NVIDIA driver supports (13000 for 13.0; 0
    when it does not say), or None when there is no driver: its library,
    libcuda, cannot be loaded. CuPy's own error cannot tell the two apart: it
    reports a missing driver as one too old for its runtime."""
    names = ("libcuda.so.1", ctypes.util.find_library("cuda"), "nvcuda.dll")
    for name in filter(None, names):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        version = ctypes.c_int(0)
        # cuDriverGetVersion needs no cuInit; CUDA_SUCCESS is 0.
        return version.value if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 else 0
    return None


def _driver_release() -> str | None:
    """The driver's release number (e.g. 575.51.03) through NVML, when it answers."""
    import pynvml

    pynvml.nvmlInit()
    release = pynvml.nvmlSystemGetDriverVersion()
    return release.decode() if isinstance(release, bytes) else str(release)


def no_usable_gpu(exc: Exception, driver: int | None, runtime: int | None, release: str | None) -> NoGPUError:
    """The NoGPUError for CuPy's ``exc``, told apart by what the driver says:
    none installed, one older than CuPy's CUDA runtime, or one with no GPU."""
    if driver is None:
        return NoGPUError(
            "No NVIDIA driver was found on this machine (its library, libcuda, is not installed), "
            "so there is no GPU to run kernels on.",
            f"On a machine with an NVIDIA GPU, install its driver{_release_needed(runtime)}. {NO_GPU_FIX}",
        )
    if driver and runtime and driver < runtime // 1000 * 1000:
        found = f"release {release}, " if release else ""
        return NoGPUError(
            f"The NVIDIA driver here ({found}CUDA {_version(driver)}) is older than the CUDA {_version(runtime)} "
            "runtime gemmlab uses.",
            f"Update the driver{_release_needed(runtime)}. {NO_GPU_FIX}",
        )
    return NoGPUError(f"The NVIDIA driver found no usable GPU ({exc}).", NO_GPU_FIX)


def _release_needed(runtime: int | None) -> str:
    """' (release R580 or newer, for CUDA 13)', or '' for a runtime not in the table."""
    major = runtime // 1000 if runtime else None
    if major not in MIN_DRIVER_RELEASE:
        return ""
    return f" (release {MIN_DRIVER_RELEASE[major]} or newer, for CUDA {major})"


def cupy():
    return _cupy()


def device_count() -> int:
    return _cupy().cuda.runtime.getDeviceCount()


def describe(index: int = 0) -> DeviceInfo:
    cp = _cupy()
    rt = cp.cuda.runtime
    attr = rt.deviceGetAttribute
    # Attribute numbers from cudaDeviceAttr (driver_types.h); they are stable.
    clock_khz = _try(lambda: attr(13, index))  # cudaDevAttrClockRate
    mem_clock_khz = _try(lambda: attr(36, index))  # cudaDevAttrMemoryClockRate
    bus_bits = _try(lambda: attr(37, index))  # cudaDevAttrGlobalMemoryBusWidth
    with cp.cuda.Device(index):
        free, total = rt.memGetInfo()
    props = rt.getDeviceProperties(index)
    name = props["name"]
    return DeviceInfo(
        index=index,
        name=name.decode() if isinstance(name, bytes) else str(name),
        cc=(int(props["major"]), int(props["minor"])),
        sm_count=int(props["multiProcessorCount"]),
        memory_bytes=int(total),
        free_bytes=int(free),
        sm_clock_mhz=clock_khz / 1e3 if clock_khz else None,
        memory_clock_mhz=mem_clock_khz / 1e3 if mem_clock_khz else None,
        memory_bus_bits=bus_bits or None,
        l2_bytes=int(props["l2CacheSize"]),
        max_threads_per_block=int(props["maxThreadsPerBlock"]),
        max_smem_per_block=int(props["sharedMemPerBlock"]),
        max_smem_per_block_optin=int(props["sharedMemPerBlockOptin"]),
        driver_version=_version(rt.driverGetVersion()),
        runtime_version=_version(rt.runtimeGetVersion()),
    )


def _try(fn):
    try:
        return fn()
    except Exception:
        return None


@functools.cache
def _nvml_handle(index: int) -> Any:
    """NVML's handle for GPU ``index``, or None without NVML (nvidia-ml-py) or permission."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # no NVML, or not permitted
        return None


def other_processes(index: int = 0) -> list[tuple[int, str]] | None:
    """The processes other than this one, its ancestors and its descendants
    that NVML says hold a context on GPU ``index`` (compute or graphics), as
    (pid, name). CUPTI sees only this process's work; this is how work of
    another process on the same GPU is told. None where NVML cannot tell: no
    NVML or no permission, or a list without this process (which holds a
    context when it asks), as in a container whose NVML reports the host's pids."""
    handle = _nvml_handle(index)
    if handle is None:
        return None
    import pynvml

    from gemmlab.core import processes

    listed: set[int] = set()
    for query in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        found = _try(lambda q=query: getattr(pynvml, q)(handle))
        if found is None:
            return None
        listed |= {int(p.pid) for p in found}
    me = os.getpid()
    if me not in listed:
        return None
    if listed == {me}:
        return []  # the common case: nothing else to place, no need to read /proc
    table = processes.parents()
    family = {me} | processes.ancestors(me, table) | processes.descendants(me, table)
    return [(pid, processes.name_of(pid)) for pid in sorted(listed - family)]


def current_sm_clock_mhz(index: int = 0) -> float | None:
    """The SM clock right now, through NVML when it is installed."""
    handle = _nvml_handle(index)
    if handle is None:
        return None
    import pynvml

    return _try(lambda: float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)))


# NVML's clock-event reason bits that mean the GPU ran slower than it could
# (nvml.h, nvmlClocksEventReason*); idle, application clocks and sync boost are
# left out because they are not a slowdown of a busy GPU.
SLOWDOWN_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}


def clock_slowdown_reasons(index: int = 0) -> list[str] | None:
    """Why the clocks are held back right now (empty: they are not); None if unreadable."""
    handle = _nvml_handle(index)
    if handle is None:
        return None
    import pynvml

    read = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    bits = _try(lambda: read(handle)) if read else None
    if bits is None:
        return None
    return [name for bit, name in SLOWDOWN_REASONS.items() if bits & bit]


def energy_mj(index: int = 0) -> int | None:
    """The GPU's energy counter (NVML, millijoules since the driver loaded),
    or None where NVML or the counter is not there (before Volta, no
    nvidia-ml-py). On an H200 it moved about every 100 ms (2026-11-29), so
    only a sum over many samples says anything."""
    handle = _nvml_handle(index)
    if handle is None:
        return None
    import pynvml

    return _try(lambda: int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)))
