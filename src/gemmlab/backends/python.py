"""The Python backend: a user's function (a Triton kernel's launch wrapper, a
PyTorch or CuPy expression, a Numba CUDA kernel) called on gemmlab's arrays
and stream. :mod:`gemmlab.kernels.callables` reads its declaration.

The runner (:func:`gemmlab.measure.run.run`) treats it as it treats a CUDA
kernel: it poisons C, launches, verifies, times and compares with the library
the same way. What differs is here:

- ``compile`` compiles nothing: Triton and Numba compile at the first call,
  which is the runner's warm-up launch. The resources (registers, shared
  memory, local memory) are read after that call from the Triton kernel the
  function returned, or from the Triton kernels of the user's module when
  exactly one was compiled; for anything else they are unknown (None).
- ``bind`` hands the problem's CuPy arrays to the function as the declared
  kind of array, through DLPack or the CUDA array interface (no copy: the
  function writes into gemmlab's C), and makes gemmlab's stream the current
  one of that library while the function runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gemmlab.backends.base import SpecQueries
from gemmlab.backends.nvrtc import Resources
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels.callables import PythonKernelSpec, _is_triton_kernel, call_error, missing_library
from gemmlab.kernels.spec import KernelSpec, Point
from gemmlab.problems.base import Prepared

# Only to plan repetitions: a library-class speed, as users' Python kernels
# mostly call tuned code (Triton's tiles, cuBLAS behind torch and CuPy).
ASSUMED_FLOPS = 1e13
# What gemmlab shows for a function whose compiled code it cannot see.
UNKNOWN = Resources(
    registers=None, smem_bytes=None, stack_bytes=None, spill_store_bytes=None, spill_load_bytes=None, barriers=None
)  # type: ignore[arg-type]


@dataclass
class PythonCompiled:
    """A Python kernel made ready for a device: nothing compiled ahead, so only
    the architecture; the resources once a launch has shown them."""

    arch: str
    spec: PythonKernelSpec
    returned: Any = None  # what the function's last call returned (a Triton CompiledKernel, say)

    @property
    def resources(self) -> Resources:
        return triton_resources(self.returned, self.spec.module) or UNKNOWN


def triton_resources(returned: Any, module: Any) -> Resources | None:
    """Registers, shared memory and local memory of the Triton kernel behind a
    call: the one the function returned (``kernel[grid](...)``'s value), else
    the only one its module's Triton kernels have compiled; None otherwise."""
    kernels = [returned] if hasattr(returned, "n_regs") else _compiled_triton_kernels(module)
    if len(kernels) != 1 or getattr(kernels[0], "n_regs", None) is None:
        return None
    kernel = kernels[0]
    # Triton reads CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES and reports it in 4-byte words as n_spills.
    spills = getattr(kernel, "n_spills", None)
    return Resources(
        registers=kernel.n_regs,
        # Triton allocates all of a block's shared memory dynamically; this is its amount.
        smem_bytes=getattr(getattr(kernel, "metadata", None), "shared", None),
        stack_bytes=None,
        spill_store_bytes=None if spills is None else 4 * spills,
        spill_load_bytes=None,
        barriers=None,
    )  # type: ignore[arg-type]


def _compiled_triton_kernels(module: Any) -> list[Any]:
    """Every compiled kernel in the caches of the Triton functions the module defines."""
    found: list[Any] = []
    for value in vars(module).values() if module is not None else ():
        jit = value
        while not hasattr(jit, "device_caches") and hasattr(jit, "fn"):  # autotune and heuristics wrap a JITFunction
            jit = jit.fn
        caches = getattr(jit, "device_caches", None)
        if not isinstance(caches, dict):
            continue
        for entry in caches.values():
            cache = entry[0] if isinstance(entry, tuple) else entry  # (kernels by key, target, backend, ...)
            if isinstance(cache, dict):
                found += [k for k in cache.values() if hasattr(k, "n_regs")]
    return found


@dataclass(frozen=True)
class _Caller:
    """How one kind of array reaches the function: ``convert`` turns gemmlab's
    CuPy arrays into that kind once, ``call`` runs the function with the
    stream made current (or passed, for Numba)."""

    convert: Callable[[Iterable[Any]], list[Any]]
    call: Callable[[Callable[..., Any], list[Any], dict[str, int]], Any]


def _cupy_caller(cp_stream: Any, device_index: int) -> _Caller:
    def call(function: Callable[..., Any], arrays: list[Any], keywords: dict[str, int]) -> Any:
        with cp_stream:
            return function(*arrays, **keywords)

    return _Caller(list, call)


def _torch_caller(cp_stream: Any, device_index: int) -> _Caller:
    try:
        import torch
    except ImportError:
        raise missing_library("torch", 'the kernel declares "arrays": "torch"') from None
    stream = torch.cuda.ExternalStream(cp_stream.ptr, device=torch.device("cuda", device_index))

    def convert(arrays: Iterable[Any]) -> list[Any]:
        # Under gemmlab's stream, so that DLPack's hand-over orders nothing across streams.
        with torch.cuda.stream(stream):
            return [torch.from_dlpack(a) for a in arrays]

    def call(function: Callable[..., Any], arrays: list[Any], keywords: dict[str, int]) -> Any:
        with torch.cuda.stream(stream):  # Triton launches on torch's current stream too
            return function(*arrays, **keywords)

    return _Caller(convert, call)


def _numba_caller(cp_stream: Any, device_index: int) -> _Caller:
    try:
        from numba import cuda
    except ImportError:
        raise missing_library("numba.cuda", 'the kernel declares "arrays": "numba"') from None
    stream = cuda.external_stream(cp_stream.ptr)

    def call(function: Callable[..., Any], arrays: list[Any], keywords: dict[str, int]) -> Any:
        return function(*arrays, **keywords, stream=stream)

    return _Caller(lambda arrays: [cuda.as_cuda_array(a) for a in arrays], call)


CALLERS: dict[str, Callable[[Any, int], _Caller]] = {
    "cupy": _cupy_caller,
    "torch": _torch_caller,
    "numba": _numba_caller,
}


def no_ahead_of_time(spec: KernelSpec, command: str) -> GemmlabError:
    """Why ``command`` (compile, occupancy) cannot serve a kernel that NVRTC
    does not compile: a user's Python function, or a Triton or CuTe DSL rung."""
    from gemmlab.kernels.peers.spec import MODELS, PeerSpec

    ahead = f"`gemmlab {command}` compiles CUDA C++ with NVRTC ahead of any launch"
    if isinstance(spec, PeerSpec):
        model = MODELS[spec.model].name
        return GemmlabError(
            f"{ahead}; {spec.id} is a {model} rung, which {model} compiles when it is first called.",
            f"Run it with `gemmlab run {spec.id} --size N`.",
        )
    library = compiled_by(spec) if isinstance(spec, PythonKernelSpec) else "its library"
    seen = (
        "the result shows the registers and shared memory of its Triton kernel after its first launch"
        if library == "Triton"
        else f"it verifies and times the function (the registers of what {library} runs stay unknown to gemmlab)"
    )
    return GemmlabError(
        f"{ahead}; {spec.id} is a Python function, whose GPU code {library} prepares only when it is first "
        "called, on a GPU.",
        f"Run it with `gemmlab run {spec.declaration}`: {seen}.",
    )


# The library behind each kind of array a Python kernel declares.
ARRAY_LIBRARIES = {"cupy": "CuPy", "torch": "PyTorch", "numba": "Numba"}


def compiled_by(spec: PythonKernelSpec) -> str:
    """Who makes a Python kernel's GPU code: Triton where its file defines a
    Triton kernel, else the library of the arrays it declares."""
    if spec.module is not None and any(_is_triton_kernel(value) for value in vars(spec.module).values()):
        return "Triton"
    return ARRAY_LIBRARIES.get(spec.arrays, spec.arrays)


class PythonBackend(SpecQueries):
    """Users' Python functions as a :class:`gemmlab.backends.base.DeviceBackend`.
    It lists no kernel ids: its kernels are found by the path of their file."""

    name = "python"
    on_host = False

    def kernel_ids(self) -> tuple[str, ...]:
        return ()

    def predicted_ms(self, kernel_id: str, shape: Shape, block_edge: int) -> float:
        return 2 * shape.m * shape.n * shape.k / ASSUMED_FLOPS * 1e3

    def analytic_cgma(self, kernel_id: str, shape: Shape, block_edge: int) -> float | None:
        return None  # the function's loads are its own, unseen by gemmlab

    def compile(self, point: Point, info: gpu.DeviceInfo) -> PythonCompiled:
        spec = point.spec
        assert isinstance(spec, PythonKernelSpec), f"{spec.id} is not a Python kernel"
        return PythonCompiled(info.arch, spec)

    def bind(
        self, cp: Any, point: Point, compiled: PythonCompiled, info: gpu.DeviceInfo, device_index: int,
        cp_stream: Any, seed: int | None,
    ) -> tuple[Prepared, Callable[[], None], Dim3]:  # fmt: skip
        spec = compiled.spec
        prepared = spec.problem.prepare(cp, point, cp.random.default_rng(seed))
        if not prepared.arrays:
            raise GemmlabError(
                f"the {spec.problem.name} problem hands out pointers only, and {spec.id} is a Python function.",
                "Declare the kernel in CUDA C++ with a TOML declaration instead (docs/user-kernels.md).",
            )
        caller = CALLERS[spec.arrays](cp_stream, device_index)
        arrays = caller.convert(prepared.arrays[name] for name in ("A", "B", "C"))
        keywords = spec.values(point.block_edge)
        function = spec.callable
        assert function is not None, "a loaded Python kernel has its function"

        def launch() -> None:
            try:
                compiled.returned = caller.call(function, arrays, keywords)
            except GemmlabError:
                raise
            except Exception as exc:  # the user's code: named with its line, never a bare traceback
                raise call_error(spec, exc, keywords) from exc

        return prepared, launch, point.grid


BACKEND = PythonBackend()
