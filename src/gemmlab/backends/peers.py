"""The peers backend: the Triton and CuTe DSL rungs of gemmlab.kernels.peers,
run on the problems of the CUDA C++ ladders.

``compile`` imports the rung's module, which needs its model's extra (a
clear error naming it otherwise). ``bind`` prepares the problem as for a CUDA
rung, hands its CuPy arrays to the rung as torch tensors without a copy
(DLPack; the tensor ladder's bfloat16 is stored as uint16 bits and viewed as
bfloat16), then compiles every configuration the rung offers, times each a
few launches on gemmlab's stream and keeps the fastest. The runner's launches
(checked, warm-up, timed) all run that one; nothing is tuned while it times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gemmlab.backends.base import SpecQueries
from gemmlab.backends.nvrtc import Resources
from gemmlab.backends.python import ASSUMED_FLOPS, UNKNOWN, triton_resources
from gemmlab.core import gpu
from gemmlab.core.dtypes import DTYPE_ITEMSIZE
from gemmlab.core.extras import require
from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.peers.spec import MODELS, PEERS, Operands, PeerSpec
from gemmlab.kernels.spec import Point
from gemmlab.problems.base import Prepared
from gemmlab.problems.sgemm import ALPHA, BETA

# Launches timed per configuration when the rung offers more than one; the
# first launch of each compiles it and is not timed.
TUNE_LAUNCHES = 5


@dataclass
class PeerCompiled:
    """A peer rung ready for a device: its module imported; after bind, the
    configuration chosen, the seconds its compiles and its tuning took, and
    what its last launch returned (a Triton CompiledKernel, for the resources)."""

    arch: str
    spec: PeerSpec
    module: Any
    config: Any = None
    compile_seconds: float = 0.0
    tune_seconds: float = 0.0
    returned: Any = field(default=None, repr=False)

    @property
    def tuned_config(self) -> dict[str, int] | None:
        """The chosen configuration as the results store keeps one: its named
        tile sizes, and Triton's warps and stages where it has them."""
        if self.config is None:
            return None
        extra = {name: getattr(self.config, name) for name in ("num_warps", "num_stages") if hasattr(self.config, name)}
        return {**self.config.kwargs, **extra}

    @property
    def resources(self) -> Resources:
        return triton_resources(self.returned, None) or UNKNOWN


def import_rung(spec: PeerSpec) -> Any:
    """The rung's module, after its model's library; MissingExtra naming the extra when that is absent."""
    model = MODELS[spec.model]
    require(model.module, model.extra, f"{spec.id} (a {model.name} kernel)")
    require("torch", model.extra, f"{spec.id} (its arrays are torch tensors)")
    import importlib

    return importlib.import_module(spec.module)


def torch_operands(prepared: Prepared, point: Point, sms: int) -> Operands:
    """The problem's CuPy arrays as torch tensors (no copy), with the problem's facts."""
    import torch

    # Bits stored as unsigned integers (CuPy has neither type), viewed as what they hold:
    # the tensor ladder's bfloat16 (and a bfloat16 C), the lowp ladder's e4m3 codes.
    views = {torch.uint16: torch.bfloat16, torch.uint8: torch.float8_e4m3fn}

    def tensor(name: str) -> Any:
        t = torch.from_dlpack(prepared.arrays[name])
        return t.view(views[t.dtype]) if t.dtype in views else t

    s, arrays = point.shape, prepared.arrays
    fp32 = "C_in" in arrays
    return Operands(
        a=tensor("A"), b=tensor("B"), c=tensor("C"), c_in=tensor("C_in") if fp32 else None,
        m=s.m, n=s.n, k=s.k, alpha=ALPHA if fp32 else 1.0, beta=BETA if fp32 else 0.0, b_kmajor=not fp32, sms=sms,
        scale_a=tensor("scale_a") if "scale_a" in arrays else None,
        scale_b=tensor("scale_b") if "scale_b" in arrays else None,
    )  # fmt: skip


def fastest(launches: list[Callable[[], Any]], compiled: PeerCompiled, configs: tuple[Any, ...]) -> Callable[[], Any]:
    """Compile each launch (its first call), then time TUNE_LAUNCHES of each on
    the current stream; the fastest, with the seconds both steps took in ``compiled``."""
    import torch

    start = time.perf_counter()
    for launch in launches:
        launch()
    torch.cuda.current_stream().synchronize()
    compiled.compile_seconds = time.perf_counter() - start
    if len(launches) == 1:
        compiled.config = configs[0]
        return launches[0]
    start, times = time.perf_counter(), []
    for launch in launches:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(TUNE_LAUNCHES):
            launch()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    compiled.tune_seconds = time.perf_counter() - start
    best = min(range(len(launches)), key=times.__getitem__)
    compiled.config = configs[best]
    return launches[best]


def bind_launches(spec: PeerSpec, dtype: str) -> int:
    """Launches ``bind`` makes before the runner's own (what `gemmlab profile`
    skips): each configuration's compiling launch and, when there are several,
    its TUNE_LAUNCHES timed ones."""
    count = len(import_rung(spec).configs(DTYPE_ITEMSIZE[dtype]))
    return count if count == 1 else count * (1 + TUNE_LAUNCHES)


class PeersBackend(SpecQueries):
    """The peer rungs as a :class:`gemmlab.backends.base.DeviceBackend`."""

    name = "peers"
    on_host = False

    def kernel_ids(self) -> tuple[str, ...]:
        return tuple(spec.id for spec in PEERS)

    def predicted_ms(self, kernel_id: str, shape: Shape, block_edge: int) -> float:
        return 2 * shape.m * shape.n * shape.k / ASSUMED_FLOPS * 1e3

    def analytic_cgma(self, kernel_id: str, shape: Shape, block_edge: int) -> float | None:
        return None  # the compiler chooses the loads

    def compile(self, point: Point, info: gpu.DeviceInfo) -> PeerCompiled:
        spec = point.spec
        assert isinstance(spec, PeerSpec), f"{spec.id} is not a peer rung"
        return PeerCompiled(spec.compile_arch(info.arch), spec, import_rung(spec))

    def bind(
        self, cp: Any, point: Point, compiled: PeerCompiled, info: gpu.DeviceInfo, device_index: int,
        cp_stream: Any, seed: int | None,
    ) -> tuple[Prepared, Callable[[], None], Dim3]:  # fmt: skip
        import torch

        prepared = point.spec.problem.prepare(cp, point, cp.random.default_rng(seed))
        stream = torch.cuda.ExternalStream(cp_stream.ptr, device=torch.device("cuda", device_index))
        with torch.cuda.stream(stream):  # Triton launches on torch's current stream: gemmlab's
            operands = torch_operands(prepared, point, info.sm_count)
            if compiled.config is not None:  # another input set of the same run: tuned already
                chosen = compiled.module.launcher(operands, compiled.config)
            else:
                configs = tuple(compiled.module.configs(operands.a.element_size()))
                chosen = fastest([compiled.module.launcher(operands, c) for c in configs], compiled, configs)

        def launch() -> None:
            with torch.cuda.stream(stream):
                compiled.returned = chosen()

        return prepared, launch, point.grid


BACKEND = PeersBackend()
