"""Theoretical occupancy: how many blocks of a kernel fit on one SM at once.

A block stays resident on its SM until all its threads finish, and it holds
its warps, registers and shared memory the whole time. Four limits decide how
many blocks can be resident together: warp slots, the register file, shared
memory and the SM's block slots. The smallest one wins; the occupancy is the
resident warps over the SM's maximum.

The rules follow NVIDIA's own calculators:

* ``cuda_occupancy.h`` (shipped with the CUDA toolkit; the CUDA 12.6 header for
  compute capability 3.0 to 9.0, the CUDA 7.0 header for the 1.x and 2.x
  rules it still carried then), functions named in the comments below;
* ``CUDA_Occupancy_Calculator.xls``, sheet "GPU Data" and its formulas, for
  the 1.x per-block register rule;
* the CUDA C++ Programming Guide, tables "Technical Specifications per Compute
  Capability" (CUDA 10/11 editions for 1.x to 7.2; CUDA 13 edition, tables 30,
  31 and 32, for 7.5 to 12.x), for the per-generation figures.

The 12.6 header stops at 9.0; 10.x, 11.0 and 12.x are taken to share its 9.0
allocation rules (256-register and 128-byte units, 4 sub-partitions, 1 KB
reserve) with their own figures from the guide.

The block-barrier limit of cuda_occupancy.h is left out: with the one barrier
a block gets for __syncthreads it allows at least the device's block limit,
so it never decides the result.

Everything here is plain arithmetic on plain values: no GPU is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gemmlab.core.arch import SMLimits, sm_limits
from gemmlab.core.errors import DeviceLimitError, GemmlabError

# The four limits, in the order cuda_occupancy.h tests them for its
# limitingFactors bit field (OCC_LIMIT_WARPS, _REGISTERS, _SHARED_MEMORY,
# _BLOCKS).
LIMIT_NAMES: tuple[str, ...] = ("warps", "registers", "shared_memory", "blocks")

_LIMIT_LABELS = {
    "warps": "warps",
    "registers": "registers",
    "shared_memory": "shared memory",
    "blocks": "blocks per SM",
}


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


@dataclass(frozen=True)
class OccupancyInput:
    """A kernel launch as the calculator sees it; smem_per_block is the static part."""

    cc: tuple[int, int]
    threads_per_block: int
    regs_per_thread: int
    smem_per_block: int
    dynamic_smem: int = 0
    carveout: int | None = None

    def evaluate(self) -> OccupancyResult:
        return theoretical_occupancy(
            self.cc,
            self.threads_per_block,
            self.regs_per_thread,
            self.smem_per_block,
            dynamic_smem=self.dynamic_smem,
            carveout=self.carveout,
        )


@dataclass(frozen=True)
class OccupancyResult:
    """Resident blocks, warps and threads per SM, and what limits them.

    ``regs_per_block`` and ``smem_per_block`` are the amounts allocated, after
    rounding to the allocation units (and, for shared memory, with the
    system's reserve); ``smem_requested`` is the kernel's own shared memory,
    static and dynamic, before either; ``smem_per_sm`` is the carve-out the
    calculation used.
    ``limits`` maps each of "warps", "registers", "shared_memory" and "blocks"
    to the number of blocks that resource alone would allow.
    """

    cc: tuple[int, int]
    threads_per_block: int
    warps_per_block: int
    regs_per_thread: int
    regs_per_block: int
    smem_per_block: int
    smem_per_sm: int
    limits: dict[str, int]
    active_blocks: int
    active_warps: int
    active_threads: int
    occupancy: float
    limiting_factors: list[str] = field(default_factory=list)
    smem_requested: int = 0

    @property
    def device(self) -> SMLimits:
        return sm_limits(self.cc)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cc": f"{self.cc[0]}.{self.cc[1]}",
            "threads_per_block": self.threads_per_block,
            "warps_per_block": self.warps_per_block,
            "regs_per_thread": self.regs_per_thread,
            "regs_per_block": self.regs_per_block,
            "smem_per_block": self.smem_per_block,
            "smem_requested": self.smem_requested,
            "smem_per_sm": self.smem_per_sm,
            "limits": dict(self.limits),
            "active_blocks": self.active_blocks,
            "active_warps": self.active_warps,
            "active_threads": self.active_threads,
            "occupancy": self.occupancy,
            "limiting_factors": list(self.limiting_factors),
            "device": self.device.to_dict(),
        }


def _check_inputs(
    sm: SMLimits,
    threads_per_block: int,
    regs_per_thread: int,
    smem_per_block: int,
    dynamic_smem: int,
    carveout: int | None,
) -> None:
    values = {
        "threads_per_block": threads_per_block,
        "regs_per_thread": regs_per_thread,
        "smem_per_block": smem_per_block,
        "dynamic_smem": dynamic_smem,
    }
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise GemmlabError(f"{name} must be a whole number, got {value!r}.")
        if value < 0:
            raise GemmlabError(f"{name} cannot be negative (got {value}).")
    if threads_per_block < 1:
        raise GemmlabError(
            "A block needs at least one thread (threads_per_block is 0).",
            "Give the block's thread count, e.g. 256 for a 16x16 block.",
        )
    if carveout is not None and not (
        isinstance(carveout, int) and not isinstance(carveout, bool) and 0 <= carveout <= 100
    ):
        raise GemmlabError(
            f"The carve-out preference must be a percentage from 0 to 100, got {carveout!r}.",
            "Pass None for the driver's default (the largest shared memory).",
        )
    where = f"on compute capability {sm.name}"
    if threads_per_block > sm.max_threads_per_block:
        raise DeviceLimitError(
            f"{threads_per_block} threads per block is over the limit of {sm.max_threads_per_block} {where}.",
            "Use a smaller block (e.g. a smaller block_edge).",
        )
    if regs_per_thread > sm.max_regs_per_thread:
        raise DeviceLimitError(
            f"{regs_per_thread} registers per thread is over the limit of {sm.max_regs_per_thread} {where}.",
            "Lower the register count (-maxrregcount / __launch_bounds__).",
        )
    if smem_per_block > sm.max_smem_per_block:
        raise DeviceLimitError(
            f"{smem_per_block} bytes of static shared memory per block is over the "
            f"limit of {sm.max_smem_per_block} {where}.",
            "Declare the excess as dynamic shared memory (extern __shared__) and opt in"
            " with cudaFuncSetAttribute, or use smaller tiles."
            if sm.max_smem_per_block_optin > sm.max_smem_per_block
            else "Use smaller tiles.",
        )
    total = smem_per_block + dynamic_smem
    if total > sm.max_smem_per_block_optin:
        raise DeviceLimitError(
            f"{total} bytes of shared memory per block is over the limit of {sm.max_smem_per_block_optin} {where}.",
            "Use smaller tiles or fewer pipeline stages.",
        )


def _warps_limit(sm: SMLimits, warps_per_block: int) -> int:
    # The spreadsheet divides the SM's warp slots by the block's warps as they
    # are; cuda_occupancy.h 7.0 rounded them up to pairs first on 1.x, which
    # can only matter on 1.2/1.3 with an odd warp count.
    return sm.max_warps_per_sm // warps_per_block


def _registers(sm: SMLimits, warps_per_block: int, regs_per_thread: int) -> tuple[int, int]:
    """(registers allocated per block, blocks the register file allows); 0 regs: no limit."""
    if sm.reg_alloc_granularity == "block":
        # 1.x (spreadsheet; cuda_occupancy.h 7.0): the whole block's
        # registers, with its warps counted in pairs, rounded up to the unit.
        warps = _round_up(warps_per_block, sm.warp_alloc_granularity)
        regs_per_block = _round_up(warps * regs_per_thread * sm.warp_size, sm.reg_unit_for(regs_per_thread))
        if regs_per_block == 0:
            return 0, sm.max_blocks_per_sm
        return regs_per_block, sm.regs_per_sm // regs_per_block
    regs_per_warp = _round_up(regs_per_thread * sm.warp_size, sm.reg_unit_for(regs_per_thread))
    regs_per_block = regs_per_warp * warps_per_block
    if regs_per_warp == 0:
        return 0, sm.max_blocks_per_sm
    blocks = _blocks_by_register_file(sm, sm.reg_subpartitions, warps_per_block, regs_per_warp)
    if sm.compat_reg_subpartitions and blocks:
        sibling = _blocks_by_register_file(sm, sm.compat_reg_subpartitions, warps_per_block, regs_per_warp)
        if sibling == 0:
            blocks = 0
    return regs_per_block, blocks


def _blocks_by_register_file(sm: SMLimits, subpartitions: int, warps_per_block: int, regs_per_warp: int) -> int:
    # cuda_occupancy.h: cudaOccMaxBlocksPerSMRegsLimit. The hardware checks a
    # block against the per-block register limit as if its warps were spread
    # over every sub-partition, so the warp count is rounded up to a multiple
    # of them for that check only.
    regs_assumed = regs_per_warp * _round_up(warps_per_block, subpartitions)
    if regs_assumed > sm.max_regs_per_block or regs_per_warp * warps_per_block > sm.max_regs_per_block:
        return 0
    warps_per_subpartition = (sm.regs_per_sm // subpartitions) // regs_per_warp
    return warps_per_subpartition * subpartitions // warps_per_block


def _carveout_bytes(sm: SMLimits, carveout: int | None, smem_per_block: int) -> int:
    """The shared memory per SM the driver would configure for this launch."""
    if not sm.smem_carveouts or carveout is None:
        return sm.smem_per_sm
    # cuda_occupancy.h: cudaOccSMemPreferenceVoltaPlus takes the percentage
    # of the largest size, rounded down to a byte, then the smallest
    # configurable size at least that large (cudaOccAlignUpShmemSizeVoltaPlus).
    wanted = carveout * sm.smem_per_sm // 100
    preferred = min(size for size in sm.smem_carveouts if size >= wanted)
    if preferred >= smem_per_block:
        return preferred
    # The preference is only a hint: a launch whose block does not fit in it
    # gets more (cudaOccMaxBlocksPerSMSmemLimit).
    if sm.carveout_grows_to_fit:
        return min(size for size in sm.smem_carveouts if size >= smem_per_block)
    return sm.smem_per_sm


def theoretical_occupancy(
    cc: tuple[int, int] | Sequence[int] | str,
    threads_per_block: int,
    regs_per_thread: int,
    smem_per_block: int,
    dynamic_smem: int = 0,
    carveout: int | None = None,
) -> OccupancyResult:
    """Blocks, warps and threads resident per SM for one launch configuration.

    ``smem_per_block`` is the static shared memory (as ptxas reports it) and
    ``dynamic_smem`` the launch's dynamic part. ``carveout`` is the preferred
    shared-memory share of the unified L1/shared storage in percent
    (cudaFuncAttributePreferredSharedMemoryCarveout); None means the
    calculator's default, the largest size. Where shared memory has a fixed
    size (1.x, 5.x, 6.x) the preference is ignored, as the driver does.

    A launch whose block cannot fit at all (e.g. too many registers for one
    block) gives 0 active blocks, and the resource that blocks it is named in
    ``limiting_factors``.
    """
    sm = sm_limits(cc)
    _check_inputs(sm, threads_per_block, regs_per_thread, smem_per_block, dynamic_smem, carveout)

    warps_per_block = -(-threads_per_block // sm.warp_size)
    regs_per_block, blocks_by_regs = _registers(sm, warps_per_block, regs_per_thread)

    # cuda_occupancy.h: cudaOccMaxBlocksPerSMSmemLimit rounds static +
    # dynamic + the driver's reserve up to the allocation unit. The reserve
    # is there even for a kernel with no shared memory of its own.
    smem_allocated = _round_up(smem_per_block + dynamic_smem + sm.reserved_smem_per_block, sm.smem_alloc_unit)
    smem_per_sm = _carveout_bytes(sm, carveout, smem_allocated)
    blocks_by_smem = smem_per_sm // smem_allocated if smem_allocated else sm.max_blocks_per_sm

    limits = {
        "warps": _warps_limit(sm, warps_per_block),
        "registers": blocks_by_regs,
        "shared_memory": blocks_by_smem,
        "blocks": sm.max_blocks_per_sm,
    }
    active_blocks = min(limits.values())
    # A resource the kernel does not use cannot be what limits it, even when
    # its stand-in value (the device block limit) ties with the minimum.
    unused = {"registers": regs_per_block == 0, "shared_memory": smem_allocated == 0}
    limiting = [name for name in LIMIT_NAMES if limits[name] == active_blocks and not unused.get(name)]
    active_warps = active_blocks * warps_per_block
    return OccupancyResult(
        cc=sm.cc,
        threads_per_block=threads_per_block,
        warps_per_block=warps_per_block,
        regs_per_thread=regs_per_thread,
        regs_per_block=regs_per_block,
        smem_per_block=smem_allocated,
        smem_per_sm=smem_per_sm,
        limits=limits,
        active_blocks=active_blocks,
        active_warps=active_warps,
        active_threads=active_blocks * threads_per_block,
        occupancy=active_warps / sm.max_warps_per_sm,
        limiting_factors=limiting,
        smem_requested=smem_per_block + dynamic_smem,
    )


def largest_fitting_registers(cc: tuple[int, int] | Sequence[int] | str, threads_per_block: int) -> int:
    """The most registers per thread with which one block of
    ``threads_per_block`` still fits the register file of ``cc`` (0: none).
    A bound on a compile we do not have: a document that ran such a block
    on such a GPU compiled it with at most this many."""
    sm = sm_limits(cc)
    warps_per_block = -(-threads_per_block // sm.warp_size)
    for regs in range(sm.max_regs_per_thread, 0, -1):
        if _registers(sm, warps_per_block, regs)[1] >= 1:
            return regs
    return 0


def format_limiting(factors: Sequence[str]) -> str:
    """'warps, registers' for ["warps", "registers"]; unknown names pass through."""
    return ", ".join(_LIMIT_LABELS.get(name, name) for name in factors)


def _percent(fraction: float) -> str:
    text = f"{fraction * 100:.1f}".removesuffix(".0")
    return f"{text}%"


def occupancy_table(results: Sequence[tuple[str, OccupancyResult]]) -> list[tuple[str, list[str]]]:
    """Rows of the occupancy report: one cell per column, then the device's limit.

    ``results`` pairs a column label (e.g. "8x8") with its result; all columns
    must be for one compute capability, since the last cell of each row is
    that device's limit for the row ("" where none applies).
    """
    if not results:
        raise GemmlabError(
            "The occupancy table needs at least one result.",
            "Pass [(label, theoretical_occupancy(...)), ...].",
        )
    ccs = {result.cc for _, result in results}
    if len(ccs) != 1:
        listed = ", ".join(f"{a}.{b}" for a, b in sorted(ccs))
        raise GemmlabError(
            f"One occupancy table holds one compute capability; got {listed}.",
            "Build one table per compute capability.",
        )
    sm = results[0][1].device
    rows: list[tuple[str, Any, Any]] = [
        ("Active blocks per SM", lambda r: r.active_blocks, sm.max_blocks_per_sm),
        ("Active warps per SM", lambda r: r.active_warps, sm.max_warps_per_sm),
        ("Active threads per SM", lambda r: r.active_threads, sm.max_threads_per_sm),
        ("Occupancy", lambda r: _percent(r.occupancy), ""),
        ("Warps per block", lambda r: r.warps_per_block, sm.max_threads_per_block // sm.warp_size),
        ("Threads per block", lambda r: r.threads_per_block, sm.max_threads_per_block),
        ("Registers per thread", lambda r: r.regs_per_thread, sm.max_regs_per_thread),
        # The per-SM pool is the limit these rows divide, as in the
        # spreadsheet's "Limit per SM" column.
        ("Registers per block", lambda r: r.regs_per_block, sm.regs_per_sm),
        ("Block limit (registers)", lambda r: r.limits["registers"], ""),
        *_smem_rows(sm),
        ("Block limit (shared memory)", lambda r: r.limits["shared_memory"], ""),
        ("Block limit (warps)", lambda r: r.limits["warps"], ""),
        ("Block limit (device)", lambda r: r.limits["blocks"], sm.max_blocks_per_sm),
        ("Limiting factor(s)", lambda r: format_limiting(r.limiting_factors), ""),
    ]
    return [(label, [str(cell(result)) for _, result in results] + [str(limit)]) for label, cell, limit in rows]


def _smem_rows(sm: SMLimits) -> list[tuple[str, Any, Any]]:
    """The shared-memory rows: the kernel's own per block, against the largest a
    block may opt in to; where the system reserves some per block (1 KiB on
    8.0 and newer), that reserve and the sum allocated, so that 4096 asked is
    not shown as an unexplained 5120; where the share of shared memory per SM
    is configurable, the share the calculation took."""
    rows: list[tuple[str, Any, Any]] = [
        ("Shared memory per block [B]", lambda r: r.smem_requested, sm.max_smem_per_block_optin),
    ]
    if sm.reserved_smem_per_block:
        rows += [
            ("Reserved by the system per block [B]", lambda r: sm.reserved_smem_per_block, ""),
            ("Shared memory allocated per block [B]", lambda r: r.smem_per_block, ""),
        ]
    if sm.smem_carveouts:
        rows.append(("Shared memory per SM [B] (carve-out)", lambda r: r.smem_per_sm, sm.smem_per_sm))
    return rows
