"""Theoretical occupancy of a catalogue kernel, from its real resource usage:
compile it (no GPU needed), read registers and static shared memory from
ptxas, and run the calculator of :mod:`gemmlab.measure.occupancy`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gemmlab.backends.nvrtc import compile_kernel, normalise_arch
from gemmlab.core.arch import parse_cc
from gemmlab.core.errors import ConstraintError, DeviceLimitError
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


@dataclass(frozen=True)
class OccupancyColumn:
    """One block edge's column of an occupancy table: the calculator's result,
    or, where the device cannot hold one such block at all (more threads,
    registers or shared memory than it allows), the reason (``refusal``)."""

    label: str
    block_edge: int
    result: OccupancyResult | None = None
    refusal: DeviceLimitError | None = None


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
    An edge the device cannot hold raises its DeviceLimitError
    (:func:`occupancy_columns` keeps the others and says why instead).
    """
    spec = catalogue.get(kernel) if isinstance(kernel, str) else kernel
    arch = normalise_arch(arch)
    columns = occupancy_columns(spec, spec.compile_arch(arch), cc or arch, block_edges, shape, dtype, carveout)
    return fitting(columns)


def occupancy_columns(
    spec: KernelSpec, compile_arch: str, cc: str, block_edges: list[int] | None = None,
    shape: Shape = DEFAULT_SHAPE, dtype: str | None = None, carveout: int | None = None,
) -> list[OccupancyColumn]:  # fmt: skip
    """A column per block edge of ``spec`` compiled for ``compile_arch`` (as
    :meth:`KernelSpec.compile_arch` chose it) under the rules of ``cc``; an
    edge too large for that device is a column that says why."""
    kind = dtype or spec.dtypes[0]
    resources = {}
    for edge in occupancy_edges(spec, block_edges):
        res = compile_kernel(spec, edge, kind, compile_arch).resources
        resources[edge] = (res.registers, res.smem_bytes)
    return columns_of(spec, cc, resources, shape, kind, carveout)


def occupancy_edges(spec: KernelSpec, block_edges: list[int] | None) -> list[int]:
    """The block edges a table (of occupancy, or of a compile's resources) has
    columns for: those given (each within the kernel's range), else the
    kernel's own; [0] for a kernel without one."""
    edges = (block_edges or list(spec.block_edges)) if spec.takes_block_edge else [0]
    for edge in edges:
        # Only the block's geometry matters here, so the shape constraints
        # (divisibility) are not checked; the block edge range is.
        if spec.takes_block_edge and not 1 <= edge <= spec.max_edge:
            # The fix follows the side it fell off: an edge counts threads, so it is positive.
            what = "is not positive" if edge < 1 else f"is over {spec.id}'s largest, {spec.max_edge}"
            raise ConstraintError(
                f"The block edge {edge} {what}: {spec.id} takes edges from 1 to {spec.max_edge}.",
                f"Give --block from 1 to {spec.max_edge}, e.g. its own: {', '.join(map(str, spec.block_edges))}.",
            )
    return edges


def occupancy_of(
    spec: KernelSpec, cc: str, resources: dict[int, tuple[int, int]], shape: Shape = DEFAULT_SHAPE,
    dtype: str | None = None, carveout: int | None = None,
) -> list[tuple[str, OccupancyResult]]:  # fmt: skip
    """The columns of :func:`kernel_occupancy` from resource counts already
    known (registers per thread and static shared memory per block edge, as a
    stored compile holds them): no compile, so a report read from a database
    shows the compile that was measured."""
    return fitting(columns_of(spec, cc, resources, shape, dtype, carveout))


def columns_of(
    spec: KernelSpec, cc: str, resources: dict[int, tuple[int, int]], shape: Shape = DEFAULT_SHAPE,
    dtype: str | None = None, carveout: int | None = None,
) -> list[OccupancyColumn]:  # fmt: skip
    """:func:`occupancy_of`'s columns, each edge the device cannot hold kept as a refusal."""
    kind = dtype or spec.dtypes[0]
    columns = []
    for edge, (registers, smem_bytes) in resources.items():
        label = column_label(spec, edge, shape)
        try:
            result = theoretical_occupancy(
                parse_cc(cc),
                spec.threads_per_block(shape, edge),
                registers,
                smem_bytes,
                dynamic_smem=Point(spec, shape, edge, kind).dynamic_smem,
                carveout=carveout,
            )
        except DeviceLimitError as exc:
            # Kept without its traceback, which would keep this frame alive.
            columns.append(OccupancyColumn(label, edge, refusal=exc.with_traceback(None)))
            continue
        columns.append(OccupancyColumn(label, edge, result))
    return columns


def fitting(columns: list[OccupancyColumn]) -> list[tuple[str, OccupancyResult]]:
    """(label, result) of every column, or the first column's refusal: for a
    table with no place to say why a column is missing."""
    for column in columns:
        if column.refusal is not None:
            raise column.refusal
    return [(column.label, column.result) for column in columns if column.result is not None]
