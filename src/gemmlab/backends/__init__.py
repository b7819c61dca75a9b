"""How a kernel becomes something to measure: the explicit list of backends.

Every kernel id is served by exactly one backend (:mod:`gemmlab.backends.base`
defines what a backend provides):

- ``nvrtc`` (:mod:`gemmlab.backends.nvrtc`): the catalogue's CUDA C++ kernels,
  compiled with NVRTC to cubins, loaded and launched through cuda.core;
- ``cpu`` (:mod:`gemmlab.backends.cpu`): the CPU baselines ``cpu_naive``,
  ``cpu_blocked`` and ``cpu_blas``, run on the host;
- ``python`` (:mod:`gemmlab.backends.python`): users' Python functions
  (Triton, PyTorch, CuPy, Numba), found by the path of their file;
- ``peers`` (:mod:`gemmlab.backends.peers`): the Triton and CuTe DSL rungs
  of gemmlab.kernels.peers, on the CUDA C++ ladders' problems.

Code that needs to know anything about a kernel's kind asks
:func:`for_kernel` (or :func:`on_host`), never the id's spelling.

Adding a backend: write ``backends/<name>.py`` as :mod:`gemmlab.backends.base`
describes and append its ``BACKEND`` to :data:`BACKENDS` below; nothing else
changes.
"""

from __future__ import annotations

from gemmlab.backends import cpu, nvrtc, peers, python
from gemmlab.backends.base import Backend
from gemmlab.core.errors import UnknownName, unknown_name
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec

# Every backend, in the order `gemmlab kernels` and error messages list their kernels.
BACKENDS: tuple[Backend, ...] = (nvrtc.BACKEND, cpu.BACKEND, python.BACKEND, peers.BACKEND)

# The backend names as stored with results.
NVRTC: str = nvrtc.BACKEND.name
CPU: str = cpu.BACKEND.name
PYTHON: str = python.BACKEND.name
PEERS: str = peers.BACKEND.name


_BY_KERNEL: dict[str, Backend] = {kernel_id: b for b in BACKENDS for kernel_id in b.kernel_ids()}
assert len(_BY_KERNEL) == sum(len(b.kernel_ids()) for b in BACKENDS), "a kernel id is served by two backends"


_BY_NAME: dict[str, Backend] = {b.name: b for b in BACKENDS}


def for_kernel(kernel_id: str) -> Backend:
    """The backend that serves ``kernel_id`` (a catalogue id, a CPU baseline,
    or a user's kernel by path or id); UnknownName (with close names) otherwise."""
    backend = _BY_KERNEL.get(kernel_id)
    if backend is not None:
        return backend
    try:
        spec = catalogue.get(kernel_id)
    except UnknownName:
        listing = f"`gemmlab kernels` lists every kernel; the CPU baselines are {', '.join(cpu.CPU_KERNELS)}."
        raise unknown_name("kernel", kernel_id, [*catalogue.known_ids(), *cpu.CPU_KERNELS], listing) from None
    return for_spec(spec)


def for_spec(spec: KernelSpec) -> Backend:
    """The backend named by a kernel given as a spec rather than an id (a user's
    file, a tuned configuration)."""
    try:
        return _BY_NAME[spec.backend]
    except KeyError:
        raise UnknownName(
            f"{spec.id} names the backend {spec.backend!r}, which this gemmlab does not have.",
            f"Backends: {', '.join(_BY_NAME)}.",
        ) from None


def kernel_id(name: str) -> str:
    """The id results are stored under for a kernel named ``name`` on the
    command line: a user's kernel's path becomes its id (folder/stem)."""
    if name in _BY_KERNEL:
        return name
    return catalogue.get(name).id


def on_host(kernel_id: str) -> bool:
    """Whether ``kernel_id`` runs on the host (no GPU, no profile, no roofline point).
    An id no backend serves (a stored row of a kernel since renamed, say) counts
    as a GPU kernel, as every stored kernel but the CPU baselines was."""
    backend = _BY_KERNEL.get(kernel_id)
    return backend is not None and backend.on_host
