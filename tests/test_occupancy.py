"""Occupancy calculator: cases worked out by hand from NVIDIA's rules.

Each expected value carries its arithmetic; the rules are the ones cited in
src/gemmlab/occupancy.py (cuda_occupancy.h, the occupancy spreadsheet and the
programming guide's per-compute-capability tables).
"""

from __future__ import annotations

import json

import pytest

from gemmlab.core.arch import known_compute_capabilities, sm_limits
from gemmlab.core.errors import DeviceLimitError, GemmlabError, UnknownName
from gemmlab.measure.occupancy import (
    LIMIT_NAMES,
    OccupancyInput,
    format_limiting,
    largest_fitting_registers,
    occupancy_table,
    theoretical_occupancy,
)

# --- compute capability 1.x: registers per block, warps in pairs ----------------


def test_cc12_22x22_block_has_a_partial_last_warp() -> None:
    r = theoretical_occupancy((1, 2), 22 * 22, 10, 2048)
    assert r.warps_per_block == 16  # 484 / 32 = 15.125 -> 16 warps, the last one partial
    assert r.regs_per_block == 5120  # 16 warps (even) * 32 * 10 = 5120, a multiple of 512
    assert r.smem_per_block == 2048  # 2048 is a multiple of the 512-byte unit
    assert r.limits == {
        "warps": 2,  # 32 warps per SM // 16
        "registers": 3,  # 16384 // 5120
        "shared_memory": 8,  # 16384 // 2048
        "blocks": 8,  # device limit on 1.x
    }
    assert r.active_blocks == 2
    assert r.active_warps == 32  # 2 * 16
    assert r.active_threads == 968  # 2 * 484
    assert r.occupancy == 1.0  # 32 / 32
    assert r.limiting_factors == ["warps"]


def test_cc12_odd_warp_count_is_paired_for_registers_only() -> None:
    r = theoretical_occupancy("1.2", 80, 10, 0)
    assert r.warps_per_block == 3  # 80 / 32 = 2.5 -> 3
    # registers: warps paired 3 -> 4; 4 * 32 * 10 = 1280 -> rounded to 512 = 1536
    assert r.regs_per_block == 1536
    assert r.limits["registers"] == 10  # 16384 // 1536
    assert r.limits["warps"] == 10  # 32 // 3, the warp slots take the unpaired count
    assert r.active_blocks == 8  # the 8-block device limit binds
    assert r.occupancy == 0.75  # 8 * 3 = 24 warps of 32
    assert r.limiting_factors == ["blocks"]


def test_cc1x_register_allocation_unit_256_then_512() -> None:
    # 96 threads = 3 warps, paired to 4: 4 * 32 * 5 = 640 registers before rounding.
    cc10 = theoretical_occupancy((1, 0), 96, 5, 0)
    cc11 = theoretical_occupancy((1, 1), 96, 5, 0)
    cc13 = theoretical_occupancy((1, 3), 96, 5, 0)
    assert cc10.regs_per_block == cc11.regs_per_block == 768  # 640 -> multiple of 256
    assert cc13.regs_per_block == 1024  # 640 -> multiple of 512
    assert cc11.limits["registers"] == 10  # 8192 // 768
    assert cc13.limits["registers"] == 16  # 16384 // 1024
    assert cc11.limits["warps"] == 8  # 24 // 3
    assert cc11.active_blocks == 8
    assert cc11.occupancy == 1.0  # 8 * 3 = 24 of 24 warps
    assert cc13.occupancy == 0.75  # 8 * 3 = 24 of 32 warps


def test_cc1x_no_reserved_or_extra_shared_memory() -> None:
    r = theoretical_occupancy((1, 1), 64, 8, 100)
    assert r.smem_per_block == 512  # 100 bytes -> one 512-byte unit, nothing added
    assert r.limits["shared_memory"] == 32  # 16384 // 512


# --- compute capability 2.x: registers per warp, 2 sub-partitions ----------------


def test_cc20_register_rounding_per_warp() -> None:
    r = theoretical_occupancy((2, 0), 256, 19, 0)
    # 19 * 32 = 608 registers per warp -> rounded to 64 = 640; 8 warps -> 5120
    assert r.regs_per_block == 5120
    # 32768 / 2 sub-partitions = 16384; 16384 // 640 = 25 warps each -> 50 warps; 50 // 8 = 6
    assert r.limits["registers"] == 6
    assert r.limits["warps"] == 6  # 48 // 8
    assert r.active_blocks == 6
    assert r.occupancy == 1.0  # 6 * 8 = 48 of 48
    assert r.limiting_factors == ["warps", "registers"]


def test_cc20_some_register_counts_round_to_128() -> None:
    # cuda_occupancy.h (CUDA 7.0) allocates 21, 22, 29, 30, 37, 38, 45 and 46
    # registers per thread on Fermi in units of 128.
    r = theoretical_occupancy((2, 0), 352, 21, 0)
    assert r.warps_per_block == 11  # 352 / 32
    # 21 * 32 = 672 -> rounded to 128 = 768 per warp (it would be 704 with 64); 11 warps -> 8448
    assert r.regs_per_block == 8448
    # 16384 // 768 = 21 warps per sub-partition -> 42 warps; 42 // 11 = 3 (46 // 11 = 4 with 64)
    assert r.limits["registers"] == 3
    assert r.limits["warps"] == 4  # 48 // 11
    assert r.active_blocks == 3
    assert r.occupancy == 33 / 48  # 3 * 11 warps
    assert r.limiting_factors == ["registers"]


def test_cc20_allows_63_registers_not_64() -> None:
    assert theoretical_occupancy((2, 1), 128, 63, 0).active_blocks > 0
    with pytest.raises(DeviceLimitError, match="63"):
        theoretical_occupancy((2, 1), 128, 64, 0)


# --- compute capability 6.0: GP100's 2 sub-partitions and the Pascal check ---------


def test_cc60_two_subpartitions_fit_more_warps_than_cc61() -> None:
    # 40 * 32 = 1280 registers per warp (a multiple of 256)
    gp100 = theoretical_occupancy((6, 0), 64, 40, 0)
    gp10x = theoretical_occupancy((6, 1), 64, 40, 0)
    assert gp100.limits["registers"] == 25  # 32768 // 1280 = 25 per half -> 50 warps; 50 // 2
    assert gp10x.limits["registers"] == 24  # 16384 // 1280 = 12 per quarter -> 48 warps; 48 // 2
    assert gp100.active_blocks == 25  # warps allow 64 // 2 = 32, blocks 32
    assert gp10x.active_blocks == 24


def test_cc60_refuses_what_cc61_cannot_run() -> None:
    # 576 threads = 18 warps, 104 * 32 = 3328 registers per warp.
    # Two sub-partitions: 3328 * 18 = 59904 <= 65536 and 32768 // 3328 = 9 -> 18 warps -> 1 block.
    # Four (6.1): 3328 * roundup(18, 4) = 3328 * 20 = 66560 > 65536 -> 0, and 6.0 follows.
    assert theoretical_occupancy((6, 1), 576, 104, 0).limits["registers"] == 0
    r = theoretical_occupancy((6, 0), 576, 104, 0)
    assert r.limits["registers"] == 0
    assert r.active_blocks == 0
    assert r.limiting_factors == ["registers"]


# --- compute capability 9.0: 1 KB reserve, 128-byte unit, carve-outs ---------------


def test_cc90_256_threads_32_regs_4096_smem() -> None:
    r = theoretical_occupancy((9, 0), 256, 32, 4096)
    assert r.warps_per_block == 8
    assert r.regs_per_block == 8192  # 32 * 32 = 1024 per warp (multiple of 256) * 8
    assert r.smem_per_block == 5120  # 4096 + 1024 reserved = 5120, a multiple of 128
    assert r.smem_per_sm == 233472  # default: the largest carve-out, 228 KB
    assert r.limits == {
        "warps": 8,  # 64 // 8
        "registers": 8,  # 16384 // 1024 = 16 warps per sub-partition -> 64; 64 // 8
        "shared_memory": 45,  # 233472 // 5120 = 45.6
        "blocks": 32,
    }
    assert r.active_blocks == 8
    assert r.active_threads == 2048
    assert r.occupancy == 1.0
    assert r.limiting_factors == ["warps", "registers"]


def test_cc90_shared_memory_rounds_to_128_after_the_reserve() -> None:
    r = theoretical_occupancy("sm_90", 256, 32, 4000)
    assert r.smem_per_block == 5120  # 4000 + 1024 = 5024 -> 40 * 128 = 5120


def test_cc90_zero_shared_memory_still_holds_the_reserve() -> None:
    r = theoretical_occupancy((9, 0), 256, 32, 0)
    assert r.smem_per_block == 1024  # the driver's 1 KB per block, already a multiple of 128
    assert r.limits["shared_memory"] == 228  # 233472 // 1024
    assert r.active_blocks == 8
    assert "shared_memory" not in r.limiting_factors


def test_cc90_255_registers_at_1024_threads_cannot_launch() -> None:
    r = theoretical_occupancy((9, 0), 1024, 255, 0)
    # 255 * 32 = 8160 -> 8192 per warp; 32 warps -> 262144 > 65536 registers per block
    assert r.regs_per_block == 262144
    assert r.limits["registers"] == 0
    assert r.active_blocks == 0
    assert r.active_warps == 0
    assert r.occupancy == 0.0
    assert r.limiting_factors == ["registers"]


def test_cc90_register_limited() -> None:
    r = theoretical_occupancy((9, 0), 256, 128, 0)
    # 128 * 32 = 4096 per warp; 16384 // 4096 = 4 warps per sub-partition -> 16 warps; 16 // 8 = 2
    assert r.regs_per_block == 32768
    assert r.limits["registers"] == 2
    assert r.active_blocks == 2
    assert r.occupancy == 0.25  # 16 of 64 warps
    assert r.limiting_factors == ["registers"]


def test_cc90_carveout_preference_picks_the_next_size_up() -> None:
    r = theoretical_occupancy((9, 0), 256, 32, 20000, carveout=50)
    # 50% of 233472 = 116736 -> next configurable size is 132 KB = 135168
    assert r.smem_per_sm == 135168
    assert r.smem_per_block == 21120  # 20000 + 1024 = 21024 -> 165 * 128 = 21120
    assert r.limits["shared_memory"] == 6  # 135168 // 21120 = 6.4
    assert r.active_blocks == 6
    assert r.occupancy == 0.75  # 6 * 8 = 48 of 64
    assert r.limiting_factors == ["shared_memory"]
    # without a preference the whole 228 KB is used: 233472 // 21120 = 11, so warps bind at 8
    assert theoretical_occupancy((9, 0), 256, 32, 20000).active_blocks == 8


def test_cc90_carveout_too_small_for_one_block_grows_to_fit() -> None:
    r = theoretical_occupancy((9, 0), 256, 32, 20000, carveout=0)
    # 0% -> 0 KB, which cannot hold 21120 bytes; the smallest size that can is 32 KB
    assert r.smem_per_sm == 32768
    assert r.active_blocks == 1  # 32768 // 21120
    assert r.occupancy == 0.125  # 8 of 64 warps


def test_cc75_carveout_zero_means_the_smallest_turing_size() -> None:
    r = theoretical_occupancy((7, 5), 128, 32, 10000, carveout=0)
    assert r.smem_per_block == 10240  # no reserve before 8.0; 10000 -> 40 * 256
    assert r.smem_per_sm == 32768  # Turing offers 32 or 64 KB; 0% -> 32 KB
    assert r.limits["shared_memory"] == 3  # 32768 // 10240
    assert r.limits["warps"] == 8  # 32 // 4
    assert r.occupancy == 0.375  # 3 * 4 = 12 of 32 warps


def test_kepler_preference_too_small_falls_back_to_the_largest() -> None:
    r = theoretical_occupancy((3, 5), 128, 32, 20000, carveout=0)
    # 0% -> 16 KB (L1 preferred); 20000 -> 79 * 256 = 20224 does not fit, so 48 KB is used
    assert r.smem_per_block == 20224
    assert r.smem_per_sm == 49152
    assert r.limits["shared_memory"] == 2  # 49152 // 20224


def test_carveout_ignored_where_shared_memory_is_fixed() -> None:
    assert theoretical_occupancy((5, 2), 128, 32, 1024, carveout=0).smem_per_sm == 98304


def test_carveout_must_be_a_percentage() -> None:
    with pytest.raises(GemmlabError, match="0 to 100"):
        theoretical_occupancy((9, 0), 128, 32, 0, carveout=101)


def test_cc86_shared_memory_limited() -> None:
    r = theoretical_occupancy((8, 6), 128, 32, 48 * 1024)
    assert r.smem_per_block == 50176  # 49152 + 1024 = 50176 = 392 * 128
    assert r.limits == {
        "warps": 12,  # 48 // 4
        "registers": 16,  # 16 warps per sub-partition -> 64; 64 // 4
        "shared_memory": 2,  # 102400 // 50176
        "blocks": 16,
    }
    assert r.active_blocks == 2
    assert r.occupancy == 8 / 48
    assert r.limiting_factors == ["shared_memory"]


def test_dynamic_shared_memory_up_to_the_optin_maximum() -> None:
    r = theoretical_occupancy((9, 0), 128, 32, 0, dynamic_smem=227 * 1024)
    assert r.smem_per_block == 233472  # 232448 + 1024: the whole SM
    assert r.active_blocks == 1


# --- inputs the device cannot take -------------------------------------------------


@pytest.mark.parametrize(
    ("cc", "threads", "regs", "smem", "dynamic", "pattern"),
    [
        ((9, 0), 1025, 32, 0, 0, "1025 threads per block is over the limit of 1024"),
        ((1, 3), 513, 16, 0, 0, "513 threads per block is over the limit of 512"),
        ((9, 0), 128, 256, 0, 0, "256 registers per thread is over the limit of 255"),
        ((9, 0), 128, 32, 48 * 1024 + 1, 0, "static shared memory"),
        ((9, 0), 128, 32, 0, 227 * 1024 + 1, "over the limit of 232448"),
        ((6, 1), 128, 32, 0, 48 * 1024 + 1, "over the limit of 49152"),
        ((1, 1), 128, 125, 0, 0, "over the limit of 124"),
    ],
)
def test_over_limit_inputs_raise(
    cc: tuple[int, int], threads: int, regs: int, smem: int, dynamic: int, pattern: str
) -> None:
    with pytest.raises(DeviceLimitError, match=pattern) as caught:
        theoretical_occupancy(cc, threads, regs, smem, dynamic_smem=dynamic)
    assert caught.value.fix
    assert "\n" not in str(caught.value)


def test_register_error_names_the_fix() -> None:
    with pytest.raises(DeviceLimitError) as caught:
        theoretical_occupancy((9, 0), 128, 256, 0)
    assert str(caught.value) == (
        "256 registers per thread is over the limit of 255 on compute capability 9.0. "
        "Lower the register count (-maxrregcount / __launch_bounds__)."
    )


@pytest.mark.parametrize(
    ("threads", "regs", "smem", "dynamic"),
    [(0, 32, 0, 0), (-32, 32, 0, 0), (128, -1, 0, 0), (128, 32, -1, 0), (128, 32, 0, -1), (128.0, 32, 0, 0)],
)
def test_invalid_values_raise(threads: int, regs: int, smem: int, dynamic: int) -> None:
    with pytest.raises(GemmlabError) as caught:
        theoretical_occupancy((9, 0), threads, regs, smem, dynamic_smem=dynamic)
    assert not isinstance(caught.value, DeviceLimitError)


def test_unknown_compute_capability_lists_the_known_ones() -> None:
    with pytest.raises(UnknownName, match=r"4\.0.*Known: 1\.0, 1\.1.*9\.0"):
        sm_limits((4, 0))
    with pytest.raises(UnknownName, match="not a compute capability"):
        sm_limits("hopper")


# --- limiting factors ---------------------------------------------------------------


def test_limiting_factors_name_every_tie() -> None:
    r = theoretical_occupancy((1, 2), 484, 16, 2048)
    # registers: 16 * 32 * 16 = 8192; 16384 // 8192 = 2, the same as the warp limit 32 // 16
    assert r.limits["registers"] == r.limits["warps"] == 2
    assert r.limiting_factors == ["warps", "registers"]


def test_unused_registers_are_never_the_limiting_factor() -> None:
    r = theoretical_occupancy((9, 0), 32, 0, 0)
    assert r.regs_per_block == 0
    assert r.limits["registers"] == 32  # no limit: the device block limit stands in
    assert r.limits["warps"] == 64  # 64 // 1
    assert r.active_blocks == 32
    assert r.limiting_factors == ["blocks"]


def test_unused_shared_memory_is_never_the_limiting_factor() -> None:
    r = theoretical_occupancy((5, 0), 32, 0, 0)
    assert r.smem_per_block == 0
    assert r.limits["shared_memory"] == 32
    assert r.limiting_factors == ["blocks"]


def test_format_limiting() -> None:
    assert format_limiting(["warps", "shared_memory"]) == "warps, shared memory"
    assert format_limiting(["blocks"]) == "blocks per SM"
    assert format_limiting([]) == ""


# --- parsing and tables -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cc"),
    [
        ("sm_90a", (9, 0)),
        ("9.0", (9, 0)),
        ("90", (9, 0)),
        ("compute_90", (9, 0)),
        ("sm_100a", (10, 0)),
        ("10.3", (10, 3)),
        ("120", (12, 0)),
        ("sm_121", (12, 1)),
        ((8, 6), (8, 6)),
    ],
)
def test_sm_limits_parses_the_usual_spellings(text: str | tuple[int, int], cc: tuple[int, int]) -> None:
    assert sm_limits(text).cc == cc


def test_known_compute_capabilities_cover_every_generation() -> None:
    known = known_compute_capabilities()
    assert known == sorted(known)
    for cc in [(1, 0), (1, 3), (2, 1), (3, 7), (5, 3), (6, 2), (7, 2), (8, 7), (10, 3), (11, 0), (12, 1)]:
        assert cc in known


@pytest.mark.parametrize("cc", known_compute_capabilities())
def test_every_known_cc_runs_a_small_block(cc: tuple[int, int]) -> None:
    r = theoretical_occupancy(cc, 128, 32, 0)
    assert 0 < r.occupancy <= 1
    assert r.active_blocks == min(r.limits.values())
    assert set(r.limits) == set(LIMIT_NAMES)
    assert r.limiting_factors


def test_per_generation_figures() -> None:
    hopper = sm_limits("9.0")
    assert (hopper.max_warps_per_sm, hopper.max_blocks_per_sm, hopper.smem_per_sm) == (64, 32, 228 * 1024)
    assert hopper.max_smem_per_block_optin == 227 * 1024
    assert hopper.reserved_smem_per_block == 1024
    assert sm_limits("8.9").max_blocks_per_sm == 24
    assert sm_limits("7.5").max_threads_per_sm == 1024
    assert sm_limits("12.0").smem_carveouts[-1] == 100 * 1024
    assert sm_limits("8.7").smem_carveouts == sm_limits("8.0").smem_carveouts
    assert sm_limits("1.1").reg_alloc_granularity == "block"
    assert sm_limits("2.0").reg_alloc_granularity == "warp"


def test_occupancy_input_evaluates_like_the_function() -> None:
    inp = OccupancyInput(cc=(9, 0), threads_per_block=256, regs_per_thread=32, smem_per_block=4096)
    assert inp.evaluate() == theoretical_occupancy((9, 0), 256, 32, 4096)


def test_to_dict_is_json_ready_and_carries_the_device() -> None:
    data = theoretical_occupancy((9, 0), 256, 32, 4096).to_dict()
    json.dumps(data)
    assert data["cc"] == "9.0"
    assert data["limits"]["shared_memory"] == 45
    assert data["device"]["max_warps_per_sm"] == 64
    assert data["device"]["regs_per_sm"] == 65536


def test_occupancy_table_layout() -> None:
    small = theoretical_occupancy((1, 2), 64, 10, 1024)  # 8x8 block
    big = theoretical_occupancy((1, 2), 484, 10, 2048)  # 22x22 block
    rows = dict(occupancy_table([("8x8", small), ("22x22", big)]))
    assert list(rows) == [
        "Active blocks per SM",
        "Active warps per SM",
        "Active threads per SM",
        "Occupancy",
        "Warps per block",
        "Threads per block",
        "Registers per thread",
        "Registers per block",
        "Block limit (registers)",
        "Shared memory per block [B]",
        "Block limit (shared memory)",
        "Block limit (warps)",
        "Block limit (device)",
        "Limiting factor(s)",
    ]
    # 8x8: 2 warps; registers 2 * 32 * 10 = 640 -> 1024, 16384 // 1024 = 16; smem 1024, 16 blocks;
    # warps 32 // 2 = 16; the 8-block device limit binds: 16 warps of 32 = 50%.
    assert rows["Active blocks per SM"] == ["8", "2", "8"]
    assert rows["Active warps per SM"] == ["16", "32", "32"]
    assert rows["Active threads per SM"] == ["512", "968", "1024"]
    assert rows["Occupancy"] == ["50%", "100%", ""]
    assert rows["Registers per thread"] == ["10", "10", "124"]
    assert rows["Registers per block"] == ["1024", "5120", "16384"]
    assert rows["Block limit (registers)"] == ["16", "3", ""]
    assert rows["Shared memory per block [B]"] == ["1024", "2048", "16384"]
    assert rows["Block limit (device)"] == ["8", "8", "8"]
    assert rows["Limiting factor(s)"] == ["blocks per SM", "warps", ""]


def test_occupancy_table_percent_keeps_one_decimal() -> None:
    rows = dict(occupancy_table([("x", theoretical_occupancy((8, 6), 128, 32, 48 * 1024))]))
    assert rows["Occupancy"] == ["16.7%", ""]  # 8 / 48


def test_occupancy_table_refuses_mixed_or_empty_input() -> None:
    with pytest.raises(GemmlabError, match="one compute capability"):
        occupancy_table(
            [("a", theoretical_occupancy((9, 0), 128, 32, 0)), ("b", theoretical_occupancy((8, 0), 128, 32, 0))]
        )
    with pytest.raises(GemmlabError):
        occupancy_table([])


@pytest.mark.parametrize("cc", ["1.0", "1.2", "2.0", "7.5", "9.0"])
@pytest.mark.parametrize("threads", [64, 256, 484, 1024])
def test_largest_fitting_registers_is_the_edge_of_fitting(cc: str, threads: int) -> None:
    if threads > sm_limits(cc).max_threads_per_block:
        pytest.skip(f"a block on {cc} holds fewer than {threads} threads")
    regs = largest_fitting_registers(cc, threads)
    assert regs > 0
    assert theoretical_occupancy(cc, threads, regs, 0).limits["registers"] >= 1
    if regs < sm_limits(cc).max_regs_per_thread:
        assert theoretical_occupancy(cc, threads, regs + 1, 0).limits["registers"] == 0


def test_a_22_by_22_block_on_the_gt_240_fits_with_32_registers_at_most() -> None:
    # 16 warps, allocated per block in units of 512 registers: 32 x 512 = 16,384, the whole file.
    assert largest_fitting_registers("1.2", 22 * 22) == 32
