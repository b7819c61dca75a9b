"""The backend interface: what gemmlab asks of the code that turns a kernel id into a measurement.

A backend serves a set of kernel ids. Everything downstream reaches a kernel
through the backend that serves it, never by looking at the id or at where the
kernel's code lives:

- the sweep plans with :class:`Backend`'s catalogue side (``dtypes``,
  ``block_edges``, ``violations``, ``predicted_ms``, ``analytic_cgma``);
- the command line and the report ask ``on_host`` (a host backend needs no GPU,
  is listed first, and has no roofline point or profile);
- the runner measures with one of two shapes of backend:

  * :class:`DeviceBackend`: the kernel runs on the GPU. The backend prepares it
    (``compile``: for NVRTC, compile to a cubin for the device and refuse what
    the device cannot run) and binds it to a problem's inputs on a stream
    (``bind``: load, opt in resources, lay out the arguments and the launch
    geometry), returning a callable that launches it once. gemmlab's runner
    (:func:`gemmlab.measure.run.run`) does the rest the same way for every
    device backend: poison, warm up, verify, time, alternate with the library.
  * :class:`HostBackend`: the kernel runs on the CPU. ``measure`` verifies and
    times one point on the host and returns a result dict the store takes.

Adding a backend, in one place: write ``backends/<name>.py`` with a class that
satisfies :class:`DeviceBackend` or :class:`HostBackend` and one instance of it
named ``BACKEND``, then add that instance to ``BACKENDS`` in
:mod:`gemmlab.backends`. Its ``name`` is stored with every result it produces.
The kernel ids of all backends together must be distinct (the registry checks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gemmlab.core.shapes import Dim3, Shape
from gemmlab.kernels import catalogue

if TYPE_CHECKING:
    from gemmlab.backends.nvrtc import Resources
    from gemmlab.core.gpu import DeviceInfo
    from gemmlab.kernels.spec import Point
    from gemmlab.problems.base import Prepared


@runtime_checkable
class Backend(Protocol):
    """What the sweep, the command line and the report ask of every backend."""

    # Stored with every result; one word ("nvrtc", "cpu").
    name: str
    # True when its kernels run on the CPU: no GPU is needed, and there is no
    # launch geometry, profile or roofline point to show.
    on_host: bool

    def kernel_ids(self) -> Sequence[str]:
        """Every kernel id this backend serves."""
        ...

    def dtypes(self, kernel_id: str) -> tuple[str, ...]:
        """The element types the kernel takes; the first is its default."""
        ...

    def block_edges(self, kernel_id: str) -> tuple[int, ...]:
        """The block edges the kernel is measured with by default; (0,) when it takes none."""
        ...

    def violations(self, kernel_id: str, shape: Shape, block_edge: int, dtype: str) -> list[str]:
        """Why the point cannot run, as sentences; empty when it can."""
        ...

    def predicted_ms(self, kernel_id: str, shape: Shape, block_edge: int) -> float:
        """A rough time for one run of the point, only used to plan repetitions."""
        ...

    def analytic_cgma(self, kernel_id: str, shape: Shape, block_edge: int) -> float | None:
        """Operations per global-memory load from the kernel's structure, or None when it has no such model."""
        ...


class Compiled(Protocol):
    """What a device backend's prepared kernel tells the runner and its result."""

    arch: str  # the architecture it was built for (sm_90a, say)
    resources: Resources  # registers, shared memory, spills per thread or block


@runtime_checkable
class DeviceBackend(Backend, Protocol):
    """A backend whose kernels gemmlab's runner launches and times on the GPU."""

    def compile(self, point: Point, info: DeviceInfo) -> Compiled:
        """``point``'s kernel made ready for the device ``info`` describes; raises
        DeviceLimitError, before any launch, for what that device cannot run."""
        ...

    def bind(
        self, cp: Any, point: Point, compiled: Compiled, info: DeviceInfo, device_index: int, cp_stream: Any,
        seed: int | None,
    ) -> tuple[Prepared, Callable[[], None], Dim3]:  # fmt: skip
        """The point's inputs, allocated on ``cp_stream`` (a CuPy stream, current
        while this runs), and a callable that launches the kernel once on them
        on that stream: (prepared problem, launch, grid launched)."""
        ...


@runtime_checkable
class HostBackend(Backend, Protocol):
    """A backend whose kernels run, and are verified and timed, on the host."""

    def measure(
        self, kernel_id: str, shape: Shape, dtype: str, *, reps: int, max_seconds: float, seed: int | None = None
    ) -> dict:
        """Verify and time one point; a result dict the store takes (``result_row``)."""
        ...


class SpecQueries:
    """The catalogue side of a backend whose kernels are KernelSpecs (the
    catalogue's, or users' read through :func:`gemmlab.kernels.catalogue.get`):
    their dtypes, block edges and violations are the spec's own."""

    def dtypes(self, kernel_id: str) -> tuple[str, ...]:
        return catalogue.get(kernel_id).dtypes

    def block_edges(self, kernel_id: str) -> tuple[int, ...]:
        return catalogue.get(kernel_id).block_edges or (0,)

    def violations(self, kernel_id: str, shape: Shape, block_edge: int, dtype: str) -> list[str]:
        return catalogue.get(kernel_id).violations(shape, block_edge, dtype)
