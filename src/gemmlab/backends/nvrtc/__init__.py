"""The NVRTC backend: CUDA C++ kernels compiled with NVRTC (through
``cuda.core``) to cubins, loaded and launched through cuda.core.

The stages the runner (:func:`gemmlab.measure.run.run`) goes through for one
point, each a function of :mod:`~gemmlab.backends.nvrtc.compile` (1) or
:mod:`~gemmlab.backends.nvrtc.launch` (2 to 5), all named here:

1. :func:`compile_kernel`: the spec's instantiation to a cubin for the device's
   architecture. Works with no GPU: CI compiles every kernel for several
   architectures and reads the resource usage from the ptxas log. Compiled code
   is cached on disk, keyed by the source text, the options, the architecture
   and the NVRTC version. The source is a catalogue file or, for a spec whose
   ``source`` is a ``Path``, any file (see :func:`gemmlab.kernels.spec.kernel_source`).
2. :func:`check_device_limits`: refuse what the device cannot run, before any launch.
3. :func:`load_kernel`: the cubin loaded, with dynamic shared memory opted in
   (:func:`allow_dynamic_smem`).
4. :func:`bind`: the problem's inputs allocated and the kernel bound to them,
   its launch configuration (:func:`launch_config`) and, for a persistent
   kernel, the grid the device holds at once (:func:`resident_grid`).
5. The returned :class:`Launcher` launches it once per call.

:data:`BACKEND` offers these as a :class:`gemmlab.backends.base.DeviceBackend`
serving the catalogue's kernels.
"""

from __future__ import annotations

import math
from typing import Any

from gemmlab.backends.base import SpecQueries
from gemmlab.backends.nvrtc.compile import (
    KNOWN_ARCHS,
    LINEINFO_ENV,
    PRIVATE_CACHE_ENV,
    CompiledKernel,
    Resources,
    cache_dir,
    check_target,
    compile_kernel,
    compile_source,
    normalise_arch,
    nvrtc_compile,
    nvrtc_version,
    parse_ptxas_log,
    supported_archs,
)
from gemmlab.backends.nvrtc.launch import (
    DEPENDENT_LAUNCH_ENV,
    Launcher,
    allow_dynamic_smem,
    argument_size,
    bind,
    blocks_at_once,
    check_declared_arguments,
    check_device_limits,
    dependent_launch,
    launch_config,
    load_kernel,
    resident_grid,
)
from gemmlab.core import gpu
from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import Point
from gemmlab.problems.base import Prepared

__all__ = [
    "BACKEND", "DEPENDENT_LAUNCH_ENV", "KNOWN_ARCHS", "LINEINFO_ENV", "PRIVATE_CACHE_ENV", "CompiledKernel",
    "Launcher", "NvrtcBackend", "Resources", "allow_dynamic_smem", "argument_size", "bind", "blocks_at_once",
    "cache_dir", "check_declared_arguments", "check_device_limits", "check_target", "compile_kernel",
    "compile_source", "dependent_launch", "launch_config", "load_kernel", "normalise_arch", "nvrtc_compile",
    "nvrtc_version", "parse_ptxas_log", "resident_grid", "supported_archs",
]  # fmt: skip

# The speed model behind the sweep's repetition plan (NvrtcBackend.predicted_ms):
# deliberately crude, only meant to tell a millisecond kernel from a multi-second one.
ASSUMED_GPU_FLOPS = 1e12  # a global-memory kernel with every lane of every SM busy
ASSUMED_SMS = 128  # about an H100's 132; fewer blocks than this leave SMs idle


class NvrtcBackend(SpecQueries):
    """The catalogue's CUDA kernels as a :class:`gemmlab.backends.base.DeviceBackend`."""

    name = "nvrtc"
    on_host = False

    def kernel_ids(self) -> list[str]:
        return catalogue.kernel_ids()

    def predicted_ms(self, kernel_id: str, shape: Shape, block_edge: int) -> float:
        """2MNK over ASSUMED_GPU_FLOPS, scaled down by the share of each warp's
        lanes that have a thread (a 1x1 block runs 1 lane of 32) and by the share
        of SMs that get a block at all (single_block uses one SM)."""
        spec = catalogue.get(kernel_id)
        threads = spec.threads_per_block(shape, block_edge)
        lanes = threads / (32 * math.ceil(threads / 32))
        blocks = math.prod(spec.grid(shape, block_edge))
        busy_sms = min(1.0, blocks / ASSUMED_SMS)
        return 2 * shape.m * shape.n * shape.k / (ASSUMED_GPU_FLOPS * lanes * busy_sms) * 1e3

    def analytic_cgma(self, kernel_id: str, shape: Shape, block_edge: int) -> float | None:
        model = catalogue.get(kernel_id).cgma
        return None if model is None else float(model(shape, block_edge))

    def compile(self, point: Point, info: gpu.DeviceInfo) -> CompiledKernel:
        compiled = compile_kernel(point.spec, point.block_edge, point.dtype, point.spec.compile_arch(info.arch))
        check_device_limits(point, compiled, info)
        return compiled

    def bind(
        self, cp: Any, point: Point, compiled: CompiledKernel, info: gpu.DeviceInfo, device_index: int,
        cp_stream: Any, seed: int | None,
    ) -> tuple[Prepared, Launcher, Dim3]:  # fmt: skip
        return bind(cp, point, compiled, info, device_index, cp_stream, seed)


BACKEND = NvrtcBackend()
