"""Compiling kernels ahead of any launch, and their theoretical occupancy: what
`gemmlab compile`, `gemmlab occupancy` and :meth:`gemmlab.api.Kernel.compile`
do, with one policy for the terminal and the notebook.

What each settles for a kernel before building it: the target (the one asked
for, this GPU's, or a default where there is no GPU, since compiling needs
none), the architecture the kernel itself compiles for within that target,
that NVRTC builds it (a Python function or a peer rung is built by its own
compiler at its first run), and which block edges and element type it is built
for (:mod:`gemmlab.api.catalogue` checks those)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gemmlab.api.catalogue import chosen_dtype, gpu_specs, refuse_block
from gemmlab.core.arch import sm_limits
from gemmlab.core.errors import DeviceLimitError, NoGPUError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.spec import KernelSpec
from gemmlab.measure.kernel_occupancy import DEFAULT_SHAPE, OccupancyColumn
from gemmlab.measure.occupancy import occupancy_table, theoretical_occupancy

__all__ = [
    "DEFAULT_TARGET",
    "KernelOccupancy",
    "OccupancyColumn",
    "catalogue_for",
    "chosen_target",
    "compile_one",
    "compiled",
    "kernel_arch",
    "kernel_occupancy",
    "occupancy_rows",
    "occupancy_target",
    "raw_occupancy",
]

# The target without --arch on a machine with no GPU: Hopper, the GPU the
# catalogue's results and most of its tensor-core rungs were made for.
DEFAULT_TARGET = "sm_90"


def chosen_target(arch: str | None) -> tuple[str, str | None]:
    """The target to compile for and, where it is the default for a machine
    without a GPU, the line that says so and how to choose another."""
    from gemmlab.backends.nvrtc import check_target, normalise_arch

    if arch:
        return check_target(normalise_arch(arch)), None
    from gemmlab.core import gpu

    try:
        return gpu.describe(0).arch, None
    except NoGPUError:
        return DEFAULT_TARGET, (
            f"No usable GPU here, so the target is {DEFAULT_TARGET} ({sm_limits(DEFAULT_TARGET).arch}); "
            "choose another with --arch, e.g. --arch sm_80 or --arch sm_90a."
        )


def kernel_arch(spec: KernelSpec, target: str) -> str:
    """The architecture ``spec`` compiles for on ``target`` (its sm_XYa
    variant where it uses architecture-specific instructions), or an error
    that names the architecture it needs and the --arch that asks for it."""
    try:
        return spec.compile_arch(target)
    except DeviceLimitError as exc:
        refusal = exc
    if spec.archs:
        families = " or ".join(dict.fromkeys(sm_limits(arch).arch for arch in spec.archs))
        raise DeviceLimitError(
            f"{spec.id} uses {families}-only instructions, so it compiles for {' or '.join(spec.archs)} only; "
            f"the target is {target}.",
            f"Ask for it with `--arch {spec.archs[0]}` (compiling needs no GPU), or choose a kernel without "
            "architecture-specific instructions (`gemmlab kernels` lists what each needs).",
        ) from None
    if spec.min_cc == (0, 0):
        raise refusal
    major, minor = spec.min_cc
    raise DeviceLimitError(
        f"{spec.id} needs compute capability {major}.{minor} or newer; the target is {target}.",
        f"Ask for a newer target, e.g. `--arch sm_{major}{minor}` (compiling needs no GPU), or choose a kernel for "
        "older GPUs (`gemmlab kernels` lists what each needs).",
    ) from None


def _refuse_other_compilers(spec: KernelSpec, command: str) -> None:
    """A kernel NVRTC does not build (a Python function, a peer rung) has nothing for ``command`` to show."""
    from gemmlab.backends import NVRTC
    from gemmlab.backends.python import no_ahead_of_time

    if spec.backend != NVRTC:
        raise no_ahead_of_time(spec, command)


def compiled(spec: KernelSpec, target: str, block: Sequence[int] | None = None, dtype: str | None = None) -> list[dict]:
    """One row per block edge of ``spec`` compiled for ``target`` (as
    :func:`chosen_target` settles it): the architecture, registers, shared
    memory, stack, spills and barriers. ``block``: the edges (default: the
    kernel's own), each within the kernel's range; ``dtype``: default its first."""
    from gemmlab.backends.nvrtc import compile_kernel
    from gemmlab.measure.kernel_occupancy import occupancy_edges

    _refuse_other_compilers(spec, "compile")
    refuse_block(spec, block)
    spec_arch = kernel_arch(spec, target)
    kind = chosen_dtype(spec, dtype)
    rows = []
    for edge in occupancy_edges(spec, list(block) if block else None):
        res = compile_kernel(spec, edge, kind, spec_arch).resources
        rows.append({"kernel": spec.id, "block_edge": edge, "dtype": kind, "arch": spec_arch,
                     "registers": res.registers, "smem_bytes": res.smem_bytes, "stack_bytes": res.stack_bytes,
                     "spill_bytes": res.spill_bytes, "barriers": res.barriers})  # fmt: skip
    return rows


def compile_one(spec: KernelSpec, arch: str | None = None, block: int | None = None, dtype: str | None = None) -> dict:
    """:func:`compiled` for one block edge: ``block``, else the kernel's
    default; ``arch`` None: the target `gemmlab compile` takes without --arch
    (:func:`chosen_target`). The row's "arch" is the architecture compiled for."""
    target, _ = chosen_target(arch)
    if block is None and spec.takes_block_edge:
        block = spec.default_block_edge()
    (row,) = compiled(spec, target, None if block is None else [block], dtype)
    return row


def catalogue_for(target: str, block: list[int] | None, dtype: str | None) -> tuple[list[str], str]:
    """Every catalogue kernel (candidate rungs and peer rungs included) that
    NVRTC can compile for ``target`` with these options, and one line that
    names the others, grouped by why ("" when none is left out)."""
    kept: list[str] = []
    left_out: dict[str, list[str]] = {}
    every = gpu_specs()
    for spec in every:
        reason = _why_left_out(spec, target, block, dtype)
        if reason:
            left_out.setdefault(reason, []).append(spec.id)
        else:
            kept.append(spec.id)
    if not left_out:
        return kept, ""
    groups = "; ".join(f"{', '.join(ids)} ({reason})" for reason, ids in left_out.items())
    return kept, f"Left out {len(every) - len(kept)} of {len(every)} catalogue kernels: {groups}."


def _why_left_out(spec: KernelSpec, target: str, block: list[int] | None, dtype: str | None) -> str:
    from gemmlab.backends import NVRTC
    from gemmlab.kernels.peers.spec import MODELS, PeerSpec

    if isinstance(spec, PeerSpec):
        return f"{MODELS[spec.model].name} rungs, built by their own compiler at their first run, not by NVRTC"
    if spec.backend != NVRTC:
        return "not CUDA C++"
    try:
        kernel_arch(spec, target)
    except DeviceLimitError:
        if spec.archs:
            return f"{' or '.join(spec.archs)} only"
        return f"compute capability {spec.min_cc[0]}.{spec.min_cc[1]} or newer"
    if dtype and dtype not in spec.dtypes:
        return f"no {dtype} version"
    if block and not spec.takes_block_edge:
        return "no block edge for --block to choose"
    return ""


def occupancy_target(arch: str | None, cc: str | None) -> tuple[str, str | None]:
    """The target a kernel's occupancy is compiled for, and :func:`chosen_target`'s
    line: ``arch`` when given; else, for the rules of ``cc``, that compute
    capability's architecture (sm_75 for one older than NVRTC targets); else
    :func:`chosen_target`'s."""
    from gemmlab.measure.kernel_occupancy import compile_arch_for

    return (compile_arch_for(cc), None) if cc and not arch else chosen_target(arch)


@dataclass(frozen=True)
class KernelOccupancy:
    """One kernel's occupancy: the architecture it was compiled for, the rules
    applied (``cc``; None: that architecture's), and a column per block edge."""

    kernel: str
    arch: str
    cc: str | None
    columns: list[OccupancyColumn]


def kernel_occupancy(
    spec: KernelSpec, target: str, cc: str | None = None, block: list[int] | None = None,
    shape: Shape = DEFAULT_SHAPE, carveout: int | None = None,
) -> KernelOccupancy:  # fmt: skip
    """``spec`` compiled for ``target`` and its occupancy under the rules of
    ``cc`` (default: the compile's), a column per block edge (``block``, else
    its own); an edge the device cannot hold is a column that says why, and
    when no edge fits at all, the first one's error is raised."""
    from gemmlab.measure.kernel_occupancy import occupancy_columns

    _refuse_other_compilers(spec, "occupancy")
    refuse_block(spec, block)
    arch = kernel_arch(spec, target)
    columns = occupancy_columns(spec, arch, cc or arch, block, shape, carveout=carveout)
    refused = [c.refusal for c in columns if c.refusal is not None]
    if len(refused) == len(columns):
        raise refused[0]
    return KernelOccupancy(spec.id, arch, cc, columns)


def raw_occupancy(
    cc: str, threads: int, regs: int = 0, smem: int = 0, dynamic_smem: int = 0, carveout: int | None = None
) -> OccupancyColumn:
    """The calculator on figures given by hand, as one column labelled by its threads per block."""
    result = theoretical_occupancy(cc, threads, regs, smem, dynamic_smem=dynamic_smem, carveout=carveout)
    return OccupancyColumn(f"{threads} threads", 0, result)


def occupancy_rows(columns: list[OccupancyColumn]) -> list[tuple[str, list[str]]]:
    """The calculator's rows (label, a cell per column that has figures, then
    the device's limit) for the columns an edge the device can hold gave."""
    return occupancy_table([(c.label, c.result) for c in columns if c.result is not None])
