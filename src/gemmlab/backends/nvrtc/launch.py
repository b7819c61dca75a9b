"""A compiled kernel loaded and launched through ``cuda.core``: the device's limits checked
before any launch, dynamic shared memory opted in, the launch configuration (clusters,
programmatic dependent launch), a persistent kernel's resident grid, and the kernel
bound to a problem's inputs (:func:`bind`) as a :class:`Launcher`."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

from gemmlab.backends.nvrtc.compile import CompiledKernel
from gemmlab.core import gpu
from gemmlab.core.errors import DeclarationError, DeviceLimitError
from gemmlab.kernels.spec import KernelSpec, Point
from gemmlab.problems.base import Prepared

# Shared memory (static + dynamic) a block may use without the kernel opting in
# to more, on every architecture; check_device_limits checks the opt-in maximum.
DEFAULT_SMEM_PER_BLOCK = 48 * 1024
# Threads an SM holds at once on every GPU gemmlab knows (sm_70 to sm_90): the
# bound on resident blocks behind a persistent kernel's workspace estimate.
MAX_THREADS_PER_SM = 2048
# A kernel's parameters fit in 32764 bytes (CUDA 12.1 on), so no kernel has more than this many.
MAX_PARAMETERS = 32764
# The declared arguments passed as device pointers; the others (M, N, K, n) are int.
POINTER_ROLES = ("A", "B", "C")


@dataclass
class Launcher:
    """A compiled kernel bound to a stream, its geometry and its arguments."""

    kernel: Any
    config: Any
    stream: Any
    args: tuple
    workspace: Any = None  # the device array behind a workspace argument, kept alive with the launcher

    def __call__(self) -> None:
        from cuda.core import launch

        launch(self.stream, self.config, self.kernel, *self.args)


def check_device_limits(point: Point, compiled: CompiledKernel, info: gpu.DeviceInfo) -> None:
    """Refuse, before any launch, what the device cannot run."""
    threads = point.spec.threads_per_block(point.shape, point.block_edge)
    if threads > info.max_threads_per_block:
        raise DeviceLimitError(
            f"{point.spec.id} needs {threads} threads per block; {info.name} allows {info.max_threads_per_block}.",
            "Use a smaller block edge or size.",
        )
    smem = compiled.resources.smem_bytes + point.dynamic_smem
    if smem > info.max_smem_per_block_optin:
        raise DeviceLimitError(
            f"{point.spec.id} needs {smem} bytes of shared memory per block; {info.name} allows "
            f"{info.max_smem_per_block_optin}.",
            "Use a smaller block edge or K.",
        )
    regs = compiled.resources.registers * threads
    if regs > 65536:
        raise DeviceLimitError(
            f"{point.spec.id} needs {regs} registers per block ({compiled.resources.registers} x {threads} "
            "threads); a block may use 65536.",
            "Use a smaller block edge.",
        )
    need = point.spec.problem.device_bytes(point) + workspace_bound(point, threads, info) + gpu.MEMORY_HEADROOM
    if need > info.free_bytes:
        raise DeviceLimitError(
            f"{point.shape} needs about {need / 2**30:.1f} GiB of device memory (inputs, output and the "
            f"float64 reference); {info.name} has {info.free_bytes / 2**30:.1f} GiB free.",
            "Use a smaller size.",
        )


def workspace_bound(point: Point, threads: int, info: gpu.DeviceInfo) -> int:
    """The most workspace ``point``'s launch can take: for a persistent kernel,
    as if every SM held as many blocks as its threads allow (the launch
    itself asks the driver how many fit)."""
    if point.spec.workspace_bytes is None:
        return 0
    x, y, z = point.grid
    blocks = x * y * z
    if point.spec.persistent:
        blocks = min(blocks, info.sm_count * max(1, MAX_THREADS_PER_SM // threads))
    return point.spec.workspace_bytes(point.shape, blocks)


def allow_dynamic_smem(kernel: Any, static_bytes: int, dynamic_bytes: int, device_index: int) -> None:
    """Let ``kernel`` (a cuda.core Kernel) launch with ``dynamic_bytes`` of dynamic
    shared memory when static + dynamic is over the 48 KB a launch gets by default:
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, which the driver requires
    before such a launch. cuda.core loads cubins through the library API, so the
    handle is a CUkernel (cuKernelSetAttribute, per device); a CUfunction handle
    takes cuFuncSetAttribute. Raises DeviceLimitError when the driver refuses."""
    if dynamic_bytes <= 0 or static_bytes + dynamic_bytes <= DEFAULT_SMEM_PER_BLOCK:
        return
    from cuda.bindings import driver

    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel.handle
    if isinstance(handle, driver.CUfunction):
        (status,) = driver.cuFuncSetAttribute(handle, attribute, dynamic_bytes)
    else:
        status, device = driver.cuDeviceGet(device_index)
        if status == driver.CUresult.CUDA_SUCCESS:
            (status,) = driver.cuKernelSetAttribute(attribute, dynamic_bytes, driver.CUkernel(int(handle)), device)
    if status != driver.CUresult.CUDA_SUCCESS:
        raise DeviceLimitError(
            f"the driver refused {dynamic_bytes} bytes of dynamic shared memory (+ {static_bytes} static) for "
            f"this kernel: {status.name}.",
            "Use a configuration with less shared memory (fewer stages or a smaller tile).",
        )


# Set to 0 to launch every kernel without programmatic dependent launch, to
# time what it gains (benchmarks/scripts/pdl_probe.py) or to rule it out.
DEPENDENT_LAUNCH_ENV = "GEMMLAB_DEPENDENT_LAUNCH"


def dependent_launch(point: Point) -> bool:
    """Whether to launch ``point`` with programmatic stream serialization: the
    kernel says it waits for the launch before it (KernelSpec.dependent_launch),
    the current device has compute capability 9.0 or newer, and
    $GEMMLAB_DEPENDENT_LAUNCH is not 0."""
    if not point.spec.dependent_launch or os.environ.get(DEPENDENT_LAUNCH_ENV, "1") == "0":
        return False
    from cuda.core import Device

    return tuple(Device().compute_capability) >= (9, 0)


def launch_config(point: Point, grid: tuple[int, int, int]) -> Any:
    """cuda.core's LaunchConfig for ``point`` on ``grid`` (in blocks). With
    clusters, cuda.core counts the grid in clusters, while a KernelSpec's grid
    (what the kernel sees as gridDim) counts blocks. A kernel that waits for
    the launch before it is launched with PDL where :func:`dependent_launch`
    allows it and cuda.core knows the option (0.4 and newer)."""
    from cuda.core import LaunchConfig

    cluster = point.spec.cluster
    options: dict[str, Any] = dict(block=point.block, shmem_size=point.dynamic_smem)
    if cluster is not None:
        options["cluster"] = cluster
        grid = tuple(g // c for g, c in zip(grid, cluster, strict=True))
    if dependent_launch(point):
        try:
            return LaunchConfig(grid=grid, programmatic_stream_serialization=True, **options)
        except TypeError:  # an older cuda.core: launched as any other kernel
            pass
    return LaunchConfig(grid=grid, **options)


def blocks_at_once(kernel: Any, point: Point, info: gpu.DeviceInfo, stream: Any) -> int:
    """How many blocks of ``point`` the GPU runs at once, as the driver's
    occupancy calculator counts them: whole clusters for a clustered kernel (a
    cluster needs its blocks on SMs of one GPC, so fewer may fit than SMs /
    size). 0 when not one fits."""
    cluster = point.spec.cluster
    if cluster is None:
        threads = point.spec.threads_per_block(point.shape, point.block_edge)
        return kernel.occupancy.max_active_blocks_per_multiprocessor(threads, point.dynamic_smem) * info.sm_count
    clusters = kernel.occupancy.max_active_clusters(launch_config(point, point.grid), stream=stream)
    return clusters * cluster[0] * cluster[1] * cluster[2]


def resident_grid(kernel: Any, point: Point, info: gpu.DeviceInfo, stream: Any) -> tuple[int, int, int]:
    """A persistent kernel's grid: its work units (point.grid's x), but no
    more blocks than the GPU runs at once (:func:`blocks_at_once`)."""
    resident = blocks_at_once(kernel, point, info, stream)
    if resident < 1:
        threads = point.spec.threads_per_block(point.shape, point.block_edge)
        what = "blocks" if point.spec.cluster is None else "clustered blocks"
        raise DeviceLimitError(
            f"{point.spec.id} fits no {what} on {info.name}: {threads} threads and "
            f"{point.dynamic_smem} bytes of shared memory per block.",
            "Use a configuration with fewer stages or a smaller tile.",
        )
    x, y, z = point.grid
    return (min(x, resident), y, z)


def load_kernel(point: Point, compiled: CompiledKernel, device_index: int = 0) -> Any:
    """``compiled`` loaded from its cubin, with ``point``'s dynamic shared memory opted in."""
    from cuda.core import ObjectCode

    kernel = ObjectCode.from_cubin(compiled.cubin).get_kernel(compiled.mangled_name)
    allow_dynamic_smem(kernel, compiled.resources.smem_bytes, point.dynamic_smem, device_index)
    return kernel


# The kernel loaded last: the input sets of one timed series (gemmlab.measure.series)
# are bound one after the other to the same compile, and need its module once.
_LAST_LOADED: list[tuple[CompiledKernel, int, int, Any]] = []


def _loaded(point: Point, compiled: CompiledKernel, device_index: int) -> Any:
    """:func:`load_kernel`, reusing the kernel loaded for the same compile, shared memory and device."""
    for held, smem, device, kernel in _LAST_LOADED:
        if held is compiled and smem == point.dynamic_smem and device == device_index:
            return kernel
    kernel = load_kernel(point, compiled, device_index)
    _LAST_LOADED[:] = [(compiled, point.dynamic_smem, device_index, kernel)]
    return kernel


def bind(
    cp: Any, point: Point, compiled: CompiledKernel, info: gpu.DeviceInfo, device_index: int, cp_stream: Any,
    seed: int | None,
) -> tuple[Prepared, Launcher, tuple[int, int, int]]:  # fmt: skip
    """The point's inputs, allocated on ``cp_stream`` (call it inside ``with
    cp_stream``), and its compiled kernel bound to them on that stream, with
    the dynamic shared memory opted in and, for a persistent kernel, the grid
    the driver says fits at once: (prepared problem, launcher, grid)."""
    from cuda.core import Stream

    prepared = point.spec.problem.prepare(cp, point, cp.random.default_rng(seed))
    kernel = _loaded(point, compiled, device_index)
    stream = Stream.from_handle(cp_stream.ptr)
    grid = resident_grid(kernel, point, info, stream) if point.spec.persistent else point.grid
    args, workspace = kernel_arguments(point.spec, prepared), None
    if point.spec.arguments is not None:
        check_declared_arguments(point.spec, parameter_sizes(kernel), args)
    if point.spec.workspace_bytes is not None:
        blocks = grid[0] * grid[1] * grid[2]
        workspace = cp.zeros(max(1, point.spec.workspace_bytes(point.shape, blocks)), dtype=cp.uint8)
        args = (*args, workspace.data.ptr)
    return prepared, Launcher(kernel, launch_config(point, grid), stream, args, workspace), grid


def kernel_arguments(spec: KernelSpec, prepared: Prepared) -> tuple:
    """The launch arguments in the kernel's order: the problem's own, or those
    ``spec.arguments`` names (the declaration was checked against the problem's
    names when it was read; ``n`` exists only for square shapes, which a kernel
    taking it is limited to)."""
    if spec.arguments is None:
        return prepared.args
    return tuple(prepared.named[name] for name in spec.arguments)


def parameter_sizes(kernel: Any) -> list[int] | None:
    """The byte size of each parameter of a loaded kernel, as the driver lays
    them out (cuKernelGetParamInfo, or cuFuncGetParamInfo for a CUfunction
    handle; CUDA 12.4 drivers on): what the compiled function really takes,
    whatever its declaration says. None where the driver cannot tell."""
    from cuda.bindings import driver

    handle = kernel.handle
    if isinstance(handle, driver.CUfunction):
        query = functools.partial(driver.cuFuncGetParamInfo, handle)
    else:
        query = functools.partial(driver.cuKernelGetParamInfo, driver.CUkernel(int(handle)))
    sizes: list[int] = []
    while len(sizes) <= MAX_PARAMETERS:
        try:
            status, _offset, size = query(len(sizes))
        except RuntimeError:  # a driver older than the call: the binding finds no such function
            return None
        if status == driver.CUresult.CUDA_ERROR_INVALID_VALUE:  # past the last parameter
            return sizes
        if status != driver.CUresult.CUDA_SUCCESS:  # not supported by this driver
            return None
        sizes.append(int(size))
    return None


def argument_size(value: Any) -> int:
    """The bytes cuda.core passes for one launch argument: a NumPy scalar's own
    size (``np.int32``: 4), 8 for a Python int or float and for a pointer."""
    itemsize = getattr(value, "itemsize", None)
    return itemsize if isinstance(itemsize, int) else 8


def check_declared_arguments(spec: KernelSpec, sizes: list[int] | None, args: tuple) -> None:
    """Refuse, before any launch, a declared argument list that does not match
    the compiled function (``sizes`` from :func:`parameter_sizes`; None: the
    driver cannot tell, and the count read from the source stays the check)."""
    if sizes is None or spec.arguments is None:
        return
    where = f"`arguments` in {spec.declaration}" if spec.declaration else "the kernel's `arguments`"
    if len(sizes) != len(spec.arguments):
        raise DeclarationError(
            f"{spec.id}: the compiled function takes {len(sizes)} arguments ({_bytes(sizes)}), but the declaration "
            f"lists {len(spec.arguments)}: {', '.join(spec.arguments)}.",
            f"Correct {where} to name every argument of the function, in order.",
        )
    for i, (role, size, value) in enumerate(zip(spec.arguments, sizes, args, strict=True), start=1):
        passed = argument_size(value)
        if size != passed:
            kind = "a pointer" if role in POINTER_ROLES else "an int"
            raise DeclarationError(
                f"{spec.id}: argument {i}, declared as {role}, is {size} bytes in the compiled function, but gemmlab "
                f"passes {kind} of {passed} bytes for {role}.",
                f"Declare the function's argument as {'a float/int pointer' if role in POINTER_ROLES else 'int'} "
                f"(A, B, C are pointers, M, N, K and n are int), or correct {where}.",
            )


def _bytes(sizes: list[int]) -> str:
    return ", ".join(f"{size} bytes" for size in sizes) or "none"
