"""Theoretical occupancy of a catalogue kernel, from its real resource usage:
compile it (no GPU needed), read registers and static shared memory from
ptxas, and run the calculator of :mod:`gemmlab.measure.occupancy`.
"""

from __future__ import annotations

from gemmlab.backends.nvrtc import compile_kernel, normalise_arch
from gemmlab.core.arch import parse_cc
from gemmlab.core.errors import ConstraintError
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec, Point
from gemmlab.measure.occupancy import OccupancyResult, theoretical_occupancy

# NVRTC 13 targets sm_75 and newer. For an older compute capability (the 2014
# report's GT 240 is 1.2) the table takes the resource counts of an sm_75
# compile under the older generation's rules.
OLDEST_NVRTC_ARCH = "sm_75"


def compile_arch_for(cc: str) -> str:
    """The architecture to compile for when the rules of ``cc`` are wanted."""
    major, minor = parse_cc(cc)
    return OLDEST_NVRTC_ARCH if (major, minor) < (7, 5) else f"sm_{major}{minor}"


# Kernels whose geometry depends on the size (one thread per row of C, ...)
# are shown at this size unless another is given.
DEFAULT_SHAPE = Shape.square(1024)


def column_label(spec: KernelSpec, block_edge: int, shape: Shape) -> str:
    x, y, _ = spec.block(shape, block_edge)
    return f"{x}x{y}" if y > 1 else str(x)


def kernel_occupancy(
    kernel: str | KernelSpec,
    arch: str,
    block_edges: list[int] | None = None,
    shape: Shape = DEFAULT_SHAPE,
    dtype: str | None = None,
    carveout: int | None = None,
    cc: str | None = None,
) -> list[tuple[str, OccupancyResult]]:
    """One (column label, result) per block edge, in the 2014 report's layout.
    ``kernel``: a catalogue id, or a spec (a user's kernel).

    The kernel is compiled for ``arch`` and its registers and shared memory fed
    to the rules of ``cc`` (default: the compute capability of ``arch``). A
    separate ``cc`` lets you ask how the kernel would sit on a GPU that NVRTC
    no longer targets, such as the 2014 report's GT 240 (1.2); the resource
    counts then come from the newer compile, an approximation worth stating.
    """
    spec = catalogue.get(kernel) if isinstance(kernel, str) else kernel
    arch = normalise_arch(arch)
    kind = dtype or spec.dtypes[0]
    resources = {}
    for edge in occupancy_edges(spec, block_edges):
        res = compile_kernel(spec, edge, kind, spec.compile_arch(arch)).resources
        resources[edge] = (res.registers, res.smem_bytes)
    return occupancy_of(spec, cc or arch, resources, shape, kind, carveout)


def occupancy_edges(spec: KernelSpec, block_edges: list[int] | None) -> list[int]:
    """The block edges a table has columns for: those given (each within the
    kernel's range), else the kernel's own; [0] for a kernel without one."""
    edges = (block_edges or list(spec.block_edges)) if spec.takes_block_edge else [0]
    for edge in edges:
        # Only the block's geometry matters here, so the shape constraints
        # (divisibility) are not checked; the block edge range is.
        if spec.takes_block_edge and not 1 <= edge <= spec.max_edge:
            raise ConstraintError(f"The block edge {edge} is outside 1..{spec.max_edge}.", "Choose a smaller edge.")
    return edges


def occupancy_of(
    spec: KernelSpec, cc: str, resources: dict[int, tuple[int, int]], shape: Shape = DEFAULT_SHAPE,
    dtype: str | None = None, carveout: int | None = None,
) -> list[tuple[str, OccupancyResult]]:  # fmt: skip
    """The columns of :func:`kernel_occupancy` from resource counts already
    known (registers per thread and static shared memory per block edge, as a
    stored compile holds them): no compile, so a report read from a database
    shows the compile that was measured."""
    kind = dtype or spec.dtypes[0]
    columns = []
    for edge, (registers, smem_bytes) in resources.items():
        result = theoretical_occupancy(
            parse_cc(cc),
            spec.threads_per_block(shape, edge),
            registers,
            smem_bytes,
            dynamic_smem=Point(spec, shape, edge, kind).dynamic_smem,
            carveout=carveout,
        )
        columns.append((column_label(spec, edge, shape), result))
    return columns
