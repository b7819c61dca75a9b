"""Launch a catalogue GEMM on a caller's own arrays: what ``gemmlab.matmul``
runs once the dispatcher has picked a kernel and configuration.

The kernel is compiled as the runner compiles it (NVRTC, the cubin cached on
disk by source, options and architecture) and loaded once per process, device,
element type and configuration. Its launch plan (the catalogue point, and for a
persistent kernel the grid the driver says fits at once) is worked out once per
shape too (it saves little: benchmarks/results/2026-11-29b_h200_matmul-overhead.txt). Later
calls only build the arguments (the problem's ``operands``: pointers, or TMA
tensor maps, which hold the arrays' addresses) and launch on CuPy's current
stream. Nothing is verified here: the dispatcher launches only picks
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


@dataclass(frozen=True)
class _Plan:
    """One kernel on one shape: its point (geometry, operand builder) and
    loaded kernel, and the launch configuration with the grid it runs."""

    point: Any  # catalogue.Point
    loaded: _Loaded
    config: Any  # a cuda.core LaunchConfig
    blocks: int


# (kernel id, configuration, element type, device) -> its loaded kernel, for the life of the process.
_LOADED: dict[tuple[str, str, str, int], _Loaded] = {}
# The same key and a shape -> its launch plan, for the life of the process.
_PLANS: dict[tuple[str, str, str, int, Shape], _Plan] = {}
_DEVICES: dict[int, gpu.DeviceInfo] = {}


def device_info(device_index: int = 0) -> gpu.DeviceInfo:
    """The device's description, read once per process (NoGPUError without a GPU)."""
    if device_index not in _DEVICES:
        _DEVICES[device_index] = gpu.describe(device_index)
    return _DEVICES[device_index]


def launch_gemm(spec: KernelSpec, dtype: str, operands: GemmOperands, device_index: int = 0) -> None:
    """Launch ``spec`` (a ladder entry) once on ``operands`` on CuPy's current
    stream; ConstraintError when the shape breaks one of its rules."""
    bind_gemm(spec, dtype, operands, device_index).launch()


class BoundGemm:
    """``spec`` bound to fixed arrays: the launch arguments (tensor maps
    included) are built once, and each :meth:`launch` only queues the kernel
    on CuPy's current stream, as the runner launches it: a rung's workspace is
    zeroed once, when bound. The arrays must outlive it and keep their addresses."""

    def __init__(self, plan: _Plan, args: tuple, workspace: Any, device_index: int) -> None:
        self.plan = plan
        self.args = args
        self.workspace = workspace
        self.device_index = device_index

    def launch(self) -> None:
        from cuda.core import Device, Stream, launch

        cp = gpu.cupy()
        Device(self.device_index).set_current()
        stream = Stream.from_handle(cp.cuda.get_current_stream().ptr)
        # A workspace is zeroed once, when it is bound, and never again: the
        # rungs that take one leave it ready for their next launch (their
        # counters rearmed, their partial tiles overwritten), which is how the
        # runner times and verifies them, launch after launch on one zeroed
        # workspace (backends/nvrtc/launch.py: bind). Runs on one stream are
        # ordered; runs on different streams must be ordered by the caller.
        launch(stream, self.plan.config, self.plan.loaded.kernel, *self.args)


def bind_gemm(spec: KernelSpec, dtype: str, operands: GemmOperands, device_index: int = 0) -> BoundGemm:
    """``spec`` bound to ``operands`` (compiled, loaded and planned on first use);
    ConstraintError when the shape breaks one of its rules."""
    from cuda.core import Device, Stream

    cp = gpu.cupy()
    shape = Shape(operands.a.shape[0], operands.c_out.shape[1], operands.a.shape[1])
    Device(device_index).set_current()
    stream = Stream.from_handle(cp.cuda.get_current_stream().ptr)
    plan = _plan(spec, dtype, shape, device_index, stream)
    args = plan.point.spec.problem.operands(cp, plan.point, operands)
    workspace = None
    if spec.workspace_bytes is not None:
        workspace = cp.zeros(max(1, spec.workspace_bytes(shape, plan.blocks)), dtype=cp.uint8)
        args = (*args, workspace.data.ptr)
    return BoundGemm(plan, args, workspace, device_index)


def _plan(spec: KernelSpec, dtype: str, shape: Shape, device_index: int, stream: Any) -> _Plan:
    """``spec``'s launch plan for ``shape``, worked out on the first call (the
    ConstraintError of a shape it cannot take is raised each time, never kept)."""
    key = (spec.id, json.dumps(spec.config, sort_keys=True), dtype, device_index, shape)
    if key not in _PLANS:
        point = catalogue.point(spec.id, shape, None, dtype, spec=spec)
        if point.spec.problem.operands is None:
            raise ConstraintError(
                f"{spec.id} does not run on a caller's arrays.", "Use a kernel of the FP32 or tensor-core ladder."
            )
        loaded = _load(point, device_index)
        grid = resident_grid(loaded.kernel, point, loaded.info, stream) if spec.persistent else point.grid
        _PLANS[key] = _Plan(point, loaded, launch_config(point, grid), grid[0] * grid[1] * grid[2])
    return _PLANS[key]


def _load(point: Any, device_index: int) -> _Loaded:
    key = (point.spec.id, json.dumps(point.spec.config, sort_keys=True), point.dtype, device_index)
    if key not in _LOADED:
        info = device_info(device_index)
        compiled = compile_kernel(point.spec, point.block_edge, point.dtype, point.spec.compile_arch(info.arch))
        _LOADED[key] = _Loaded(load_kernel(point, compiled, device_index), info)
    return _LOADED[key]
