"""What one SM of each compute capability, 1.0 to 12.x, offers and how it
hands it out: the figures behind the occupancy calculator, the kernels' own
limits and the runner's device checks (sources in gemmlab.measure.occupancy)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gemmlab.core.errors import UnknownName

KB = 1024


@dataclass(frozen=True)
class SMLimits:
    """What one SM of a compute capability offers, and how it hands it out."""

    cc: tuple[int, int]
    arch: str
    max_threads_per_block: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int
    max_regs_per_block: int
    max_regs_per_thread: int
    # Registers are handed out in chunks of this many: per block on 1.x, per
    # warp from 2.x on (reg_alloc_granularity says which).
    reg_alloc_unit: int
    reg_alloc_granularity: str
    # Largest shared memory per SM, i.e. the largest carve-out where the
    # L1/shared split is configurable.
    smem_per_sm: int
    smem_alloc_unit: int
    # 48 KB is the most a block can get without opting in (and the most a
    # kernel can declare statically); the opt-in maximum needs dynamic shared
    # memory and cudaFuncSetAttribute.
    max_smem_per_block: int
    max_smem_per_block_optin: int
    reserved_smem_per_block: int = 0
    # Shared-memory sizes the driver can configure, in bytes; empty where
    # shared memory is a fixed size.
    smem_carveouts: tuple[int, ...] = ()
    # When the preferred carve-out cannot hold one block: Volta and later pick
    # the smallest size that can, Fermi and Kepler use the largest
    # (cuda_occupancy.h: cudaOccMaxBlocksPerSMSmemLimit).
    carveout_grows_to_fit: bool = False
    # Warps of a block are counted in multiples of this for register
    # allocation: 2 on 1.x, 1 later (cuda_occupancy.h 7.0:
    # cudaOccWarpAllocationGranularity; spreadsheet row "Warp allocation
    # granularity").
    warp_alloc_granularity: int = 1
    # The register file is split evenly among the warp schedulers' sub-
    # partitions and a warp's registers come from one of them, so warps that
    # fit are counted per sub-partition (cuda_occupancy.h:
    # cudaOccSubPartitionsPerMultiprocessor).
    reg_subpartitions: int = 4
    # GP100 (6.0) has 2 sub-partitions, its 6.x siblings 4; cuda_occupancy.h
    # refuses on 6.0 what could not run on 6.1, so that a binary for the
    # Pascal family runs on all of it. 0 means no such second check.
    compat_reg_subpartitions: int = 0
    # Register counts that Fermi allocates in 128-register chunks instead of
    # reg_alloc_unit (cuda_occupancy.h 7.0: cudaOccRegAllocationGranularity).
    wide_reg_alloc_counts: tuple[int, ...] = ()
    wide_reg_alloc_unit: int = 0
    warp_size: int = 32

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * self.warp_size

    @property
    def name(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"

    def reg_unit_for(self, regs_per_thread: int) -> int:
        """The register allocation unit that applies to this register count."""
        if regs_per_thread in self.wide_reg_alloc_counts:
            return self.wide_reg_alloc_unit
        return self.reg_alloc_unit

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cc"] = self.name
        data["max_threads_per_sm"] = self.max_threads_per_sm
        for key in ("smem_carveouts", "wide_reg_alloc_counts"):
            data[key] = list(data[key])
        return data


# Carve-out lists: CUDA C++ Programming Guide (CUDA 13), table 32 "Shared
# Memory Capacity per Compute Capability"; cuda_occupancy.h:
# cudaOccAlignUpShmemSizeVoltaPlus lists the same sizes.
_CARVEOUT_VOLTA = tuple(k * KB for k in (0, 8, 16, 32, 64, 96))
_CARVEOUT_TURING = tuple(k * KB for k in (32, 64))
_CARVEOUT_100 = tuple(k * KB for k in (0, 8, 16, 32, 64, 100))
_CARVEOUT_164 = (*_CARVEOUT_100, 132 * KB, 164 * KB)
_CARVEOUT_228 = (*_CARVEOUT_164, 196 * KB, 228 * KB)
# Fermi splits 64 KB as 16/48 or 48/16; Kepler lets L1 be 16, 32 or 48 KB of
# it and shared memory the rest (cuda_occupancy.h: cudaOccSMemPreference, with
# "prefer L1", "equal" and "prefer shared" mapped to sizes). GK210 (3.7) has
# 64 KB more shared memory on top.
_CARVEOUT_FERMI = (16 * KB, 48 * KB)
_CARVEOUT_KEPLER = (16 * KB, 32 * KB, 48 * KB)
_CARVEOUT_GK210 = (80 * KB, 96 * KB, 112 * KB)


def _tesla(cc: tuple[int, int], warps: int, regs: int, reg_unit: int) -> SMLimits:
    # CUDA_Occupancy_Calculator.xls, sheet GPU Data: 8 blocks and 16 KB of
    # shared memory per SM, 512-byte shared-memory unit, registers allocated
    # per block with warps counted in pairs, at most 124 registers per thread.
    return SMLimits(
        cc=cc,
        arch="Tesla",
        max_threads_per_block=512,
        max_warps_per_sm=warps,
        max_blocks_per_sm=8,
        regs_per_sm=regs,
        max_regs_per_block=regs,
        max_regs_per_thread=124,
        reg_alloc_unit=reg_unit,
        reg_alloc_granularity="block",
        smem_per_sm=16 * KB,
        smem_alloc_unit=512,
        max_smem_per_block=16 * KB,
        max_smem_per_block_optin=16 * KB,
        warp_alloc_granularity=2,
        reg_subpartitions=1,
    )


def _fermi(cc: tuple[int, int]) -> SMLimits:
    # Spreadsheet GPU Data and cuda_occupancy.h 7.0: 48 warps, 8 blocks, 32 K
    # registers handed out per warp in units of 64 (128 for the listed
    # counts), 2 sub-partitions, 63 registers per thread, 128-byte
    # shared-memory unit.
    return SMLimits(
        cc=cc,
        arch="Fermi",
        max_threads_per_block=1024,
        max_warps_per_sm=48,
        max_blocks_per_sm=8,
        regs_per_sm=32 * KB,
        max_regs_per_block=32 * KB,
        max_regs_per_thread=63,
        reg_alloc_unit=64,
        reg_alloc_granularity="warp",
        smem_per_sm=48 * KB,
        smem_alloc_unit=128,
        max_smem_per_block=48 * KB,
        max_smem_per_block_optin=48 * KB,
        smem_carveouts=_CARVEOUT_FERMI,
        reg_subpartitions=2,
        wide_reg_alloc_counts=(21, 22, 29, 30, 37, 38, 45, 46),
        wide_reg_alloc_unit=128,
    )


def _kepler_on(
    cc: tuple[int, int],
    arch: str,
    *,
    warps: int,
    blocks: int,
    smem: int,
    max_regs_per_block: int = 64 * KB,
    regs_per_sm: int = 64 * KB,
    max_regs_per_thread: int = 255,
    optin: int = 48 * KB,
    carveouts: tuple[int, ...] = (),
    **rest: Any,
) -> SMLimits:
    # From Kepler on: registers per warp in units of 256
    # (cudaOccRegAllocationGranularity), shared memory in units of 256 bytes
    # up to 7.x and 128 bytes from 8.0 (cudaOccSMemAllocationGranularity),
    # and from 8.0 the driver keeps 1 KB of each block's shared memory for
    # itself (cudaOccDeviceProp.reservedSharedMemPerBlock; the guide's
    # per-block maximum is 1 KB under the per-SM one for that reason).
    ampere_on = cc[0] >= 8
    return SMLimits(
        cc=cc,
        arch=arch,
        max_threads_per_block=1024,
        max_warps_per_sm=warps,
        max_blocks_per_sm=blocks,
        regs_per_sm=regs_per_sm,
        max_regs_per_block=max_regs_per_block,
        max_regs_per_thread=max_regs_per_thread,
        reg_alloc_unit=256,
        reg_alloc_granularity="warp",
        smem_per_sm=smem,
        smem_alloc_unit=128 if ampere_on else 256,
        max_smem_per_block=48 * KB,
        max_smem_per_block_optin=optin,
        reserved_smem_per_block=KB if ampere_on else 0,
        smem_carveouts=carveouts,
        carveout_grows_to_fit=cc[0] >= 7,
        **rest,
    )


def _build_table() -> dict[tuple[int, int], SMLimits]:
    # Figures per compute capability: CUDA C++ Programming Guide, "Technical
    # Specifications per Compute Capability" (resident blocks, warps and
    # threads per SM; registers per SM, per block and per thread; shared
    # memory per SM and per block), cross-checked with the
    # cudaOccMaxBlocksPerMultiprocessor switch of cuda_occupancy.h 12.6.
    rows = [
        _tesla((1, 0), warps=24, regs=8 * KB, reg_unit=256),
        _tesla((1, 1), warps=24, regs=8 * KB, reg_unit=256),
        # GT200-class chips doubled the register file and raised the block
        # allocation unit to 512 (spreadsheet GPU Data; cuda_occupancy.h 7.0).
        _tesla((1, 2), warps=32, regs=16 * KB, reg_unit=512),
        _tesla((1, 3), warps=32, regs=16 * KB, reg_unit=512),
        _fermi((2, 0)),
        _fermi((2, 1)),
        _kepler_on(
            (3, 0), "Kepler", warps=64, blocks=16, smem=48 * KB, max_regs_per_thread=63, carveouts=_CARVEOUT_KEPLER
        ),
        # Tegra K1: half the per-block registers of the discrete parts.
        _kepler_on(
            (3, 2), "Kepler", warps=64, blocks=16, smem=48 * KB, max_regs_per_block=32 * KB, carveouts=_CARVEOUT_KEPLER
        ),
        _kepler_on((3, 5), "Kepler", warps=64, blocks=16, smem=48 * KB, carveouts=_CARVEOUT_KEPLER),
        _kepler_on(
            (3, 7), "Kepler", warps=64, blocks=16, smem=112 * KB, regs_per_sm=128 * KB, carveouts=_CARVEOUT_GK210
        ),
        _kepler_on((5, 0), "Maxwell", warps=64, blocks=32, smem=64 * KB),
        _kepler_on((5, 2), "Maxwell", warps=64, blocks=32, smem=96 * KB),
        _kepler_on((5, 3), "Maxwell", warps=64, blocks=32, smem=64 * KB, max_regs_per_block=32 * KB),
        _kepler_on(
            (6, 0), "Pascal", warps=64, blocks=32, smem=64 * KB, reg_subpartitions=2, compat_reg_subpartitions=4
        ),
        _kepler_on((6, 1), "Pascal", warps=64, blocks=32, smem=96 * KB),
        _kepler_on((6, 2), "Pascal", warps=64, blocks=32, smem=64 * KB, max_regs_per_block=32 * KB),
        _kepler_on((7, 0), "Volta", warps=64, blocks=32, smem=96 * KB, optin=96 * KB, carveouts=_CARVEOUT_VOLTA),
        _kepler_on((7, 2), "Volta", warps=64, blocks=32, smem=96 * KB, optin=96 * KB, carveouts=_CARVEOUT_VOLTA),
        _kepler_on((7, 5), "Turing", warps=32, blocks=16, smem=64 * KB, optin=64 * KB, carveouts=_CARVEOUT_TURING),
        _kepler_on((8, 0), "Ampere", warps=64, blocks=32, smem=164 * KB, optin=163 * KB, carveouts=_CARVEOUT_164),
        _kepler_on((8, 6), "Ampere", warps=48, blocks=16, smem=100 * KB, optin=99 * KB, carveouts=_CARVEOUT_100),
        _kepler_on((8, 7), "Ampere", warps=48, blocks=16, smem=164 * KB, optin=163 * KB, carveouts=_CARVEOUT_164),
        _kepler_on((8, 9), "Ada", warps=48, blocks=24, smem=100 * KB, optin=99 * KB, carveouts=_CARVEOUT_100),
        _kepler_on((9, 0), "Hopper", warps=64, blocks=32, smem=228 * KB, optin=227 * KB, carveouts=_CARVEOUT_228),
        _kepler_on((10, 0), "Blackwell", warps=64, blocks=32, smem=228 * KB, optin=227 * KB, carveouts=_CARVEOUT_228),
        _kepler_on((10, 3), "Blackwell", warps=64, blocks=32, smem=228 * KB, optin=227 * KB, carveouts=_CARVEOUT_228),
        _kepler_on((11, 0), "Blackwell", warps=48, blocks=24, smem=228 * KB, optin=227 * KB, carveouts=_CARVEOUT_228),
        _kepler_on((12, 0), "Blackwell", warps=48, blocks=24, smem=100 * KB, optin=99 * KB, carveouts=_CARVEOUT_100),
        _kepler_on((12, 1), "Blackwell", warps=48, blocks=24, smem=100 * KB, optin=99 * KB, carveouts=_CARVEOUT_100),
    ]
    return {row.cc: row for row in rows}


SM_LIMITS: dict[tuple[int, int], SMLimits] = _build_table()

# Accepts "9.0", "90", "sm_90", "sm_90a", "compute_90", "sm_100f", "12.1".
# Without a dot the last digit is the minor version, as in nvcc's sm_XY names.
_CC_PATTERN = re.compile(r"^(?:sm_?|compute_?)?(\d+)\.?(\d)[af]?$")


def known_compute_capabilities() -> list[tuple[int, int]]:
    return sorted(SM_LIMITS)


def _known_list() -> str:
    return ", ".join(f"{a}.{b}" for a, b in known_compute_capabilities())


def parse_cc(cc: tuple[int, int] | Sequence[int] | str) -> tuple[int, int]:
    """Turn "9.0", "90", "sm_90a" or (9, 0) into (9, 0); no table lookup."""
    if isinstance(cc, str):
        match = _CC_PATTERN.match(cc.strip().lower())
        if match is None:
            raise UnknownName(
                f"{cc!r} is not a compute capability.",
                f"Write it as 9.0, 90 or sm_90; known: {_known_list()}.",
            )
        return int(match.group(1)), int(match.group(2))
    parts = tuple(cc)
    if len(parts) != 2 or not all(isinstance(p, int) for p in parts):
        raise UnknownName(
            f"{cc!r} is not a compute capability.",
            f"Give (major, minor) such as (9, 0); known: {_known_list()}.",
        )
    return parts[0], parts[1]


def sm_limits(cc: tuple[int, int] | Sequence[int] | str) -> SMLimits:
    """The SM figures for a compute capability given as (9, 0), "9.0", "90" or "sm_90a"."""
    key = parse_cc(cc)
    limits = SM_LIMITS.get(key)
    if limits is None:
        raise UnknownName(
            f"Compute capability {key[0]}.{key[1]} is not in the occupancy tables.",
            f"Known: {_known_list()}.",
        )
    return limits
