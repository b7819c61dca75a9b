"""Theoretical occupancy of a catalogue kernel, from its real resource usage:
compile it (no GPU needed), read registers and static shared memory from
ptxas, and run the calculator of :mod:`gemmlab.occupancy`.
"""

from __future__ import annotations

from gemmlab import catalogue
from gemmlab.catalogue import Shape
from gemmlab.compile import compile_kernel, normalise_arch
from gemmlab.occupancy import OccupancyResult, parse_cc, theoretical_occupancy

# Kernels whose geometry depends on the size (one thread per row of C, ...)
# are shown at this size unless another is given.
DEFAULT_SHAPE = Shape.square(1024)


def column_label(spec: catalogue.KernelSpec, block_edge: int, shape: Shape) -> str:
    x, y, _ = spec.block(shape, block_edge)
    return f"{x}x{y}" if y > 1 else str(x)


def kernel_occupancy(
    kernel_id: str,
    arch: str,
    block_edges: list[int] | None = None,
    shape: Shape = DEFAULT_SHAPE,
    dtype: str | None = None,
    carveout: int | None = None,
    cc: str | None = None,
) -> list[tuple[str, OccupancyResult]]:
    """One (column label, result) per block edge, in the 2014 report's layout.

    The kernel is compiled for ``arch`` and its registers and shared memory fed
    to the rules of ``cc`` (default: the compute capability of ``arch``). A
    separate ``cc`` lets you ask how the kernel would sit on a GPU that NVRTC
    no longer targets, such as the 2014 report's GT 240 (1.2); the resource
    counts then come from the newer compile, an approximation worth stating.
    """
    spec = catalogue.get(kernel_id)
    arch = normalise_arch(arch)
    cc = parse_cc(cc or arch)
    kind = dtype or spec.dtypes[0]
    edges = (block_edges or list(spec.block_edges)) if spec.takes_block_edge else [0]
    columns = []
    for edge in edges:
        point = catalogue.point(kernel_id, shape, edge if spec.takes_block_edge else None, kind)
        res = compile_kernel(spec, point.block_edge, kind, arch).resources
        result = theoretical_occupancy(
            cc,
            spec.threads_per_block(shape, point.block_edge),
            res.registers,
            res.smem_bytes,
            dynamic_smem=point.dynamic_smem,
            carveout=carveout,
        )
        columns.append((column_label(spec, point.block_edge, shape), result))
    return columns
