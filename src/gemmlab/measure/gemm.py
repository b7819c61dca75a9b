"""Launch a catalogue GEMM on a caller's own arrays: what ``gemmlab.matmul``
runs once the dispatcher has picked a kernel and configuration.

The kernel is compiled as the runner compiles it (NVRTC, the cubin cached on
disk by source, options and architecture) and loaded once per process, device,
element type and configuration; later calls only build the arguments (the
problem's ``operands``: pointers, or TMA tensor maps) and launch on CuPy's
current stream. Nothing is verified here: the dispatcher launches only picks
the tuner verified on this GPU, or a default rung the test suite verifies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gemmlab.backends.nvrtc import compile_kernel, launch_config, load_kernel, resident_grid
from gemmlab.core import gpu
from gemmlab.core.errors import ConstraintError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec
from gemmlab.problems.base import GemmOperands


@dataclass(frozen=True)
class _Loaded:
    kernel: Any  # a cuda.core Kernel
    info: gpu.DeviceInfo


# (kernel id, configuration, element type, device) -> its loaded kernel, for the life of the process.
_LOADED: dict[tuple[str, str, str, int], _Loaded] = {}
_DEVICES: dict[int, gpu.DeviceInfo] = {}


def device_info(device_index: int = 0) -> gpu.DeviceInfo:
    """The device's description, read once per process (NoGPUError without a GPU)."""
    if device_index not in _DEVICES:
        _DEVICES[device_index] = gpu.describe(device_index)
    return _DEVICES[device_index]


def launch_gemm(spec: KernelSpec, dtype: str, operands: GemmOperands, device_index: int = 0) -> None:
    """Launch ``spec`` (a ladder entry) once on ``operands`` on CuPy's current
    stream; ConstraintError when the shape breaks one of its rules."""
    from cuda.core import Device, Stream, launch

    cp = gpu.cupy()
    shape = Shape(operands.a.shape[0], operands.c_out.shape[1], operands.a.shape[1])
    point = catalogue.point(spec.id, shape, None, dtype, spec=spec)
    if point.spec.problem.operands is None:
        raise ConstraintError(
            f"{spec.id} does not run on a caller's arrays.", "Use a kernel of the FP32 or tensor-core ladder."
        )
    Device(device_index).set_current()
    loaded = _load(point, device_index)
    stream = Stream.from_handle(cp.cuda.get_current_stream().ptr)
    grid = resident_grid(loaded.kernel, point, loaded.info, stream) if spec.persistent else point.grid
    args = point.spec.problem.operands(cp, point, operands)
    workspace = None
    if spec.workspace_bytes is not None:
        # Zeroed on the same stream before the launch. Freed when this returns,
        # its memory goes back to CuPy's pool for this stream, so a later
        # allocation reuses it only after the launch, in stream order.
        workspace = cp.zeros(max(1, spec.workspace_bytes(shape, grid[0] * grid[1] * grid[2])), dtype=cp.uint8)
        args = (*args, workspace.data.ptr)
    launch(stream, launch_config(point, grid), loaded.kernel, *args)


def _load(point: Any, device_index: int) -> _Loaded:
    key = (point.spec.id, json.dumps(point.spec.config, sort_keys=True), point.dtype, device_index)
    if key not in _LOADED:
        info = device_info(device_index)
        compiled = compile_kernel(point.spec, point.block_edge, point.dtype, point.spec.compile_arch(info.arch))
        _LOADED[key] = _Loaded(load_kernel(point, compiled, device_index), info)
    return _LOADED[key]
