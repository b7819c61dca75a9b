"""The measured-peak harness without a GPU: FLOP counts, which families a
compute capability has, the nominal rate at a clock, every peak kernel
compiled for its architectures (no spills; its cubin issues exactly the
instructions that are counted), the store's peak rows, the CLI's answer with
no GPU, and the worklog's tables with and without measured peaks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import worklog
from typer.testing import CliRunner

from gemmlab.backends.nvrtc import compile_source
from gemmlab.cli.app import app
from gemmlab.core import gpu
from gemmlab.core.errors import NoGPUError, UnknownName
from gemmlab.core.timing import Timing
from gemmlab.measure import peak
from gemmlab.measure.occupancy import theoretical_occupancy
from gemmlab.measure.sass import find_tool, sass_opcodes, tensor_core_ops, total
from gemmlab.problems.lowp import fp8_inputs
from gemmlab.store.store import PEAK_FIELDS, Store

NEEDS_CUOBJDUMP = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump is not installed")
FAMILY = {f.id: f for f in peak.FAMILIES}
H200 = gpu.DeviceInfo(
    index=0, name="NVIDIA H200", cc=(9, 0), sm_count=132, memory_bytes=141 * 2**30, free_bytes=140 * 2**30,
    sm_clock_mhz=1980.0, memory_clock_mhz=3201.0, memory_bus_bits=6016, l2_bytes=60 * 2**20,
    max_threads_per_block=1024, max_smem_per_block=48 * 1024, max_smem_per_block_optin=227 * 1024,
    driver_version="13.0", runtime_version="13.2",
)  # fmt: skip
# The compute capabilities the kernels are compiled for here: the oldest with
# each family's instructions, and the H100/H200's.
ARCH_CCS = {
    "ffma": [(8, 0), (9, 0)],
    "mma_sync": [(8, 0), (9, 0)],
    "wgmma": [(9, 0)],
    "mma_sync_int8": [(8, 0), (9, 0)],
    "mma_sync_fp8": [(8, 9)],
    "wgmma_int8": [(9, 0)],
    "wgmma_fp8": [(9, 0)],
}
CASES = [(f.id, i.dtype, cc) for f in peak.FAMILIES for i in f.instructions for cc in ARCH_CCS[f.id]]


def a_peak(family: str = "wgmma", dtype: str = "bfloat16", gflops: float = 800_000.0, **changes: object) -> peak.Peak:
    instruction = FAMILY[family].instruction(dtype)
    made = peak.Peak(
        family=family, instruction=instruction.name, dtype=dtype, gflops=gflops, nominal_gflops=1_000_000.0,
        sm_clock_after_mhz=1455.0, timing=Timing(50.0, 49.5, 51.0, 10), flops=40_000_000_000_000, iterations=75_000,
        grid=132, block=256, registers=154, arch="sm_90a", warnings=["clocks held back during the run: power cap"],
    )  # fmt: skip
    return replace(made, **changes)


# --- FLOPs, families, nominal rates ---------------------------------------------------


def test_flops_per_instruction_are_2_m_n_k() -> None:
    flops = {(f.id, i.dtype): i.flops for f in peak.FAMILIES for i in f.instructions}
    assert flops == {
        ("ffma", "float32"): 2,
        ("mma_sync", "bfloat16"): 2 * 16 * 8 * 16,
        ("mma_sync", "float16"): 2 * 16 * 8 * 16,
        ("mma_sync", "tf32"): 2 * 16 * 8 * 8,
        ("wgmma", "bfloat16"): 2 * 64 * 256 * 16,
        ("wgmma", "float16"): 2 * 64 * 256 * 16,
        ("wgmma", "tf32"): 2 * 64 * 256 * 8,
        ("mma_sync_int8", "int8"): 2 * 16 * 8 * 32,
        ("mma_sync_fp8", "e4m3"): 2 * 16 * 8 * 32,
        ("wgmma_int8", "int8"): 2 * 64 * 256 * 32,
        ("wgmma_fp8", "e4m3"): 2 * 64 * 256 * 32,
        ("wgmma_fp8", "e5m2"): 2 * 64 * 256 * 32,
        ("wgmma_fp8", "e5m2xe4m3"): 2 * 64 * 256 * 32,
    }


def test_a_launch_counts_what_its_loop_issues() -> None:
    # FFMA: every thread issues 8 chains x 32 steps per iteration.
    assert FAMILY["ffma"].launch_flops("float32", 1056, 1000) == 2 * (8 * 32) * (1056 * 256) * 1000
    # mma.sync: every warp issues 8 accumulators x 4 per iteration.
    assert FAMILY["mma_sync"].launch_flops("tf32", 660, 10) == 2048 * (8 * 4) * (660 * 8) * 10
    # wgmma: every warpgroup issues one wgmma_slice (4 steps) per iteration; two per block.
    assert FAMILY["wgmma"].launch_flops("bfloat16", 132, 7) == 524_288 * 4 * (132 * 2) * 7


@pytest.mark.parametrize(
    ("cc", "expected"),
    [
        ((7, 5), {"ffma"}),
        ((8, 0), {"ffma", "mma_sync", "mma_sync_int8"}),
        ((8, 6), {"ffma", "mma_sync", "mma_sync_int8"}),
        ((8, 9), {"ffma", "mma_sync", "mma_sync_int8", "mma_sync_fp8"}),  # FP8 mma.sync is Ada's
        ((9, 0), {"ffma", "mma_sync", "wgmma", "mma_sync_int8", "wgmma_int8", "wgmma_fp8"}),
        ((10, 0), {"ffma", "mma_sync", "mma_sync_int8"}),  # wgmma is sm_90a's alone
        ((12, 0), {"ffma", "mma_sync", "mma_sync_int8"}),
    ],
)
def test_families_per_compute_capability(cc: tuple[int, int], expected: set[str]) -> None:
    found = peak.families_for(cc)
    assert {f.id for f, _ in found} == expected
    assert len(found) == sum(len(FAMILY[f].instructions) for f in expected)


def test_families_for_chosen_types_and_their_architectures() -> None:
    assert [(f.id, i.dtype) for f, i in peak.families_for((9, 0), ["tf32"])] == [
        ("mma_sync", "tf32"),
        ("wgmma", "tf32"),
    ]
    assert [(f.id, i.dtype) for f, i in peak.families_for((9, 0), ["float32"])] == [("ffma", "float32")]
    assert peak.families_for((7, 5), ["bfloat16"]) == []
    assert FAMILY["wgmma"].compile_arch((9, 0)) == "sm_90a"
    assert FAMILY["mma_sync"].compile_arch((8, 6)) == "sm_86"
    assert FAMILY["ffma"].compile_arch((12, 0)) == "sm_120"


def test_eight_bit_families_and_why_hopper_has_no_fp8_mma_sync() -> None:
    assert [(f.id, i.dtype) for f, i in peak.families_for((9, 0), ["e4m3", "int8"])] == [
        ("mma_sync_int8", "int8"),
        ("wgmma_int8", "int8"),
        ("wgmma_fp8", "e4m3"),
    ]
    assert [f.id for f, _ in peak.families_for((8, 9), ["e4m3"])] == ["mma_sync_fp8"]
    ((family, why),) = peak.left_out((9, 0))
    assert family == "mma_sync_fp8" and "HMMA" in why and peak.left_out((8, 9)) == []
    assert FAMILY["wgmma_fp8"].name_expression("e4m3") == "peak_wgmma8<gl_e4m3, 2>"
    assert FAMILY["mma_sync_int8"].name_expression("int8") == "peak_mma8<gl_s8, 256, 8, 4>"
    # 2 x 64 x 256 x 32 per wgmma, 4 per iteration, 2 warpgroups a block.
    assert FAMILY["wgmma_int8"].launch_flops("int8", 132, 10) == 2 * 64 * 256 * 32 * 4 * 2 * 132 * 10


def test_eight_bit_nominal_rates_are_twice_the_sixteen_bit_ones() -> None:
    h100 = gpu.TENSOR_FLOPS_PER_SM_CLOCK[(9, 0)]
    assert h100["e4m3"] == h100["e5m2"] == h100["e5m2xe4m3"] == h100["int8"] == 2 * h100["bfloat16"]
    assert gpu.TENSOR_FLOPS_PER_SM_CLOCK[(8, 0)]["int8"] == 2 * gpu.TENSOR_FLOPS_PER_SM_CLOCK[(8, 0)]["bfloat16"]


def test_unknown_types_are_named() -> None:
    with pytest.raises(UnknownName, match="float64") as err:
        peak.checked_dtypes(["bfloat16", "float64"])
    assert "float32 or bfloat16 or float16 or tf32" in err.value.fix
    assert peak.checked_dtypes(None) is None and peak.checked_dtypes(["tf32", "tf32"]) == ("tf32",)
    with pytest.raises(UnknownName, match="no float32 version"):
        FAMILY["wgmma"].name_expression("float32")


def test_template_instantiations() -> None:
    assert FAMILY["ffma"].name_expression("float32") == "peak_ffma<256, 8, 32>"
    assert FAMILY["mma_sync"].name_expression("float16") == "peak_mma<gl_fp16, 256, 8, 4>"
    assert FAMILY["wgmma"].name_expression("tf32") == "peak_wgmma<gl_tf32, 2>"


def test_nominal_rates_at_a_clock() -> None:
    # FP32: 128 lanes x 2 FLOPs x 132 SMs x 1.5 GHz; tensor: 4096 (bf16) and 2048 (tf32) FLOP per SM per clock.
    assert FAMILY["ffma"].nominal_gflops(H200, "float32", 1500.0) == pytest.approx(128 * 2 * 132 * 1.5)
    assert FAMILY["wgmma"].nominal_gflops(H200, "bfloat16", 1455.0) == pytest.approx(4096 * 132 * 1.455)
    assert FAMILY["mma_sync"].nominal_gflops(H200, "tf32", 1455.0) == pytest.approx(2048 * 132 * 1.455)
    # No clock read: the boost clock, as gemmlab.gpu gives it.
    assert FAMILY["ffma"].nominal_gflops(H200, "float32", None) == pytest.approx(H200.peak_fp32_gflops)
    assert FAMILY["wgmma"].nominal_gflops(H200, "float16", None) == pytest.approx(H200.peak_tensor_gflops("float16"))
    # Compute capabilities without a known tensor rate have none.
    assert FAMILY["mma_sync"].nominal_gflops(replace(H200, cc=(8, 6)), "bfloat16", 1500.0) is None


def test_the_ratio_and_the_fastest_family_per_type() -> None:
    p = a_peak(gflops=800_000.0)
    assert p.ratio_to_nominal == pytest.approx(0.8)
    assert a_peak(nominal_gflops=None).ratio_to_nominal is None
    slow, fast, ffma = a_peak("mma_sync", gflops=500_000.0), a_peak("wgmma"), a_peak("ffma", "float32", 60_000.0)
    assert peak.best_by_dtype([slow, fast, ffma]) == {"bfloat16": fast, "float32": ffma}


def test_launch_length() -> None:
    assert peak.iterations_for(50.0, 1.0, 1024) == 51_200
    assert peak.iterations_for(50.0, 0.0, 1024) == 1024  # no usable probe: keep the probe's count
    assert peak.iterations_for(50.0, 1e-9, 1024) == peak.MAX_ITERATIONS
    assert peak.iterations_for(1e-9, 50.0, 1024) == 1


# --- the kernels ------------------------------------------------------------------------


def _compiled(family_id: str, dtype: str, cc: tuple[int, int]):
    family = FAMILY[family_id]
    return compile_source(f"peak_{family_id}", family.source, family.name_expression(dtype), family.compile_arch(cc))


@pytest.mark.parametrize(("family_id", "dtype", "cc"), CASES, ids=[f"{f}-{d}-sm{c[0]}{c[1]}" for f, d, c in CASES])
def test_every_peak_kernel_compiles_without_spills(family_id: str, dtype: str, cc: tuple[int, int]) -> None:
    compiled = _compiled(family_id, dtype, cc)
    res = compiled.resources
    assert compiled.cubin[:4] == b"\x7fELF"
    assert res.registers > 0 and res.spill_bytes == 0 and res.stack_bytes == 0, res


@NEEDS_CUOBJDUMP
@pytest.mark.parametrize(("family_id", "dtype", "cc"), CASES, ids=[f"{f}-{d}-sm{c[0]}{c[1]}" for f, d, c in CASES])
def test_the_cubin_issues_exactly_what_is_counted(family_id: str, dtype: str, cc: tuple[int, int]) -> None:
    """The loop runs one iteration per trip (unroll 1) and nothing outside it
    issues the instruction, so the cubin's static count is one iteration's."""
    family = FAMILY[family_id]
    ops = sass_opcodes(_compiled(family_id, dtype, cc).cubin)
    assert total(ops, family.sass) == family.per_iteration
    if family_id == "ffma":
        assert not tensor_core_ops(ops)
    else:
        assert all(op.split(".")[0] == family.sass for op in tensor_core_ops(ops))
        assert total(ops, "FFMA") == 0
    if family_id == "wgmma_fp8":
        # Each FP8 pair's peak is its own instruction: A's format, then B's.
        a, b = (f.upper() for f in fp8_inputs(dtype))
        assert {op.split(".", 3)[-1] for op in tensor_core_ops(ops)} == {f"{a}.{b}"}


def test_launch_shapes_fill_the_sm() -> None:
    """FFMA at full occupancy; mma.sync with at least 4 warps per sub-partition
    (each with 8 independent accumulators); wgmma one block per SM, whose
    accumulators (128 registers per thread) leave room for no second one."""
    for cc in ((8, 0), (9, 0)):
        ffma = _compiled("ffma", "float32", cc).resources
        assert theoretical_occupancy(cc, peak.FFMA_THREADS, ffma.registers, ffma.smem_bytes).occupancy == 1.0
        mma = _compiled("mma_sync", "bfloat16", cc).resources
        assert theoretical_occupancy(cc, peak.MMA_THREADS, mma.registers, mma.smem_bytes).active_warps >= 16
    wgmma = _compiled("wgmma", "bfloat16", (9, 0)).resources
    assert wgmma.smem_bytes == (64 + 256) * 128  # the A slab and the B tile, 128-byte rows
    assert theoretical_occupancy((9, 0), FAMILY["wgmma"].threads, wgmma.registers, wgmma.smem_bytes).active_blocks == 1


# --- storage and the command line -------------------------------------------------------


def test_peak_rows_round_trip(tmp_path: Path) -> None:
    rows = [
        a_peak("mma_sync", gflops=500_000.0),
        a_peak("wgmma", gflops=780_000.0),
        a_peak("ffma", "float32", 64_000.0),
    ]
    assert all(set(p.row()) == set(PEAK_FIELDS) for p in rows)
    with Store.open(tmp_path / "r.sqlite") as store:
        first = store.start_run({"gpu_name": "NVIDIA H200", "cc": "9.0", "gemmlab_version": "0.1.0"})
        store.add_peaks(first, [p.row() for p in rows])
        # A later run of one family only: its row is the newest of that family.
        later = store.start_run({"gpu_name": "NVIDIA H200", "cc": "9.0"})
        store.add_peaks(later, [a_peak("wgmma", gflops=760_000.0).row()])
        store.add_peaks(store.start_run({"gpu_name": "NVIDIA H100"}), [a_peak("wgmma", gflops=1.0).row()])
        stored = store.peaks("NVIDIA H200")
        latest = store.latest_peak("NVIDIA H200", "bfloat16")
        assert store.latest_peak("NVIDIA H200", "tf32") is None
        assert [r["gflops"] for r in store.peaks(dtype="bfloat16")] == [500_000.0, 780_000.0, 760_000.0, 1.0]
        with pytest.raises(ValueError, match="unknown peak fields: typo"):
            store.add_peaks(later, [{**rows[0].row(), "typo": 1}])
    first_wgmma = stored[1]
    assert first_wgmma["family"] == "wgmma" and first_wgmma["instruction"] == "wgmma.m64n256k16"
    assert (first_wgmma["median_ms"], first_wgmma["reps"], first_wgmma["iterations"]) == (50.0, 10, 75_000)
    assert first_wgmma["ratio_to_nominal"] == pytest.approx(0.78) and first_wgmma["sm_clock_after_mhz"] == 1455.0
    assert first_wgmma["warnings"] == ["clocks held back during the run: power cap"]
    assert (first_wgmma["gpu_name"], first_wgmma["cc"], first_wgmma["gemmlab_version"]) == (
        "NVIDIA H200",
        "9.0",
        "0.1.0",
    )
    assert first_wgmma["date"] and first_wgmma["created"]
    assert len(stored) == 4
    assert latest is not None and (latest["family"], latest["gflops"], latest["run_id"]) == ("wgmma", 760_000.0, later)


def test_cli_without_gpu_says_so_and_creates_no_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_gpu() -> None:
        raise NoGPUError("No usable NVIDIA driver or GPU on this machine (test).", gpu.NO_GPU_FIX)

    monkeypatch.setattr(gpu, "_cupy", no_gpu)
    db = tmp_path / "peaks.sqlite"
    result = CliRunner().invoke(app, ["peak", "--db", str(db)])
    assert result.exit_code == 3, result.output
    assert "No usable NVIDIA driver" in result.output and "Traceback" not in result.output
    assert not db.exists()


def test_cli_refuses_an_unknown_type_before_anything(tmp_path: Path) -> None:
    db = tmp_path / "peaks.sqlite"
    result = CliRunner().invoke(app, ["peak", "--dtype", "float64", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert "No peak is measured for float64" in result.output and "--dtype float32" in result.output
    assert not db.exists()


# --- the worklog's tensor tables ----------------------------------------------------------


def _bench(measured: list[bool]) -> dict:
    """Two results (bf16, tf32) as tensor_bench.py stores them; those marked
    True carry the measured peak, and the bench holds the peaks then."""
    results = []
    for dtype, has_peak in zip(("bfloat16", "tf32"), measured, strict=True):
        r = {"kernel": "tc_cluster", "m": 4096, "n": 4096, "k": 4096, "dtype": dtype, "gflops": 700_000.0,
             "baseline_gflops": 700_000.0, "ratio_to_baseline": 1.0, "peak_gflops_at_clock": 1_000_000.0,
             "device": {"name": "NVIDIA H200"}, "host": {"date": "2026-11-22T08:00:00+00:00"}}  # fmt: skip
        if has_peak:
            r.update(measured_peak_gflops=875_000.0, measured_peak_instruction="wgmma.m64n256k16")
        results.append(r)
    bench: dict = {"results": results}
    if any(measured):
        bench["peaks"] = {"wgmma/bfloat16": a_peak(gflops=875_000.0, nominal_gflops=1_000_000.0).to_dict()}
    return bench


def test_worklog_cells_use_the_measured_peak_when_the_benchmark_has_it() -> None:
    text = worklog.tensor_section(_bench([True, True]), "x.json")
    assert "700 (100.0%, 80% of measured peak)" in text and "of peak)" not in text
    assert "% of the measured peak of that type" in text and "dense tensor-core peak" not in text
    assert "| `wgmma.m64n256k16` | bfloat16 | 875.0 | 1455 | 1000.0 | 87.5% |" in text


def test_worklog_without_measured_peaks_keeps_the_nominal_one() -> None:
    text = worklog.tensor_section(_bench([False, False]), "x.json")
    assert "700 (100.0%, 70% of peak)" in text and "measured peak" not in text
    assert "of that shape), and % of the dense tensor-core peak at the SM clock read right after each run." in text
    assert "| instruction |" not in text


def test_worklog_says_which_peak_each_type_uses_when_only_some_have_one() -> None:
    text = worklog.tensor_section(_bench([True, False]), "x.json")
    assert "80% of measured peak" in text and "70% of peak)" in text
    assert "for a type without one,\n% of the dense tensor-core peak at the SM clock read right after each run." in text
