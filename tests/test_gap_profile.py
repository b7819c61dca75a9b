"""benchmarks/scripts/gap_profile.py without a GPU: cases from a dispatch
result, ncu's raw CSV split by the marker kernels, and the report's findings."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("gap_profile", ROOT / "benchmarks" / "scripts" / "gap_profile.py")
gp = importlib.util.module_from_spec(_SPEC)
sys.modules["gap_profile"] = gp
_SPEC.loader.exec_module(gp)

STALL_LS = gp.stall_metric("long_scoreboard")
STALL_NI = gp.stall_metric("no_instruction")
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
HEAD = ["ID", "Kernel Name", "gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_active.avg", ISSUE,
        "smsp__inst_executed.sum", STALL_LS, STALL_NI]  # fmt: skip


def _csv(rows: list[list[str]]) -> str:
    lines = ["==PROF== Connected to process 1", ",".join(f'"{h}"' for h in HEAD)]
    lines.append(",".join('""' if i == 0 else '"unit"' for i in range(len(HEAD))))  # the units row
    lines += [",".join(f'"{v}"' for v in row) for row in rows]
    return "\n".join(lines) + "\n"


def test_cases_from_a_dispatch_result_keep_the_shapes_under_the_threshold(tmp_path):
    def entry(dtype, size, kernel, config, share):
        m, n, k = size
        return {"dtype": dtype, "m": m, "n": n, "k": k, "kernel": kernel, "config": config, "share": share}

    result = {"results": [
        entry("float32", (128, 4096, 4096), "sgemm_split_k", {"SPLITS": 4, "BM": 64}, 80.1),
        entry("float32", (4096, 4096, 4096), "sgemm_padded_b", {}, 95.6),
        entry("bfloat16", (1536, 1536, 1536), "tc_tma_store", {"BN": 144}, 93.0),
        entry("bfloat16", (8192, 8192, 8192), "tc_tma_store", {}, 101.0),
    ]}  # fmt: skip
    path = tmp_path / "d.json"
    path.write_text(json.dumps(result))
    cases = gp.cases_from_file(str(path), None)  # 90% for float32, 95% otherwise
    assert [(c.dtype, c.shape, c.rung) for c in cases] == [
        ("float32", "128x4096x4096", "sgemm_split_k"),
        ("bfloat16", "1536x1536x1536", "tc_tma_store"),
    ]
    assert dict(cases[0].config) == {"SPLITS": 4, "BM": 64}
    assert [c.shape for c in gp.cases_from_file(str(path), 90.0)] == ["128x4096x4096"]  # one threshold for every type
    # the same case twice (another file, another share) is profiled once
    assert len(gp.unique(cases + gp.cases_from_file(str(path), None))) == 2


def test_case_from_text_takes_a_square_and_a_configuration():
    c = gp.case_from_text('float32:512:sgemm_split_k:{"SPLITS": 2}')
    assert (c.m, c.n, c.k, c.rung, dict(c.config)) == (512, 512, 512, "sgemm_split_k", {"SPLITS": 2})
    assert gp.case_from_text("bfloat16:64x4096x4096:tc_small").config == ()


def test_rows_are_split_by_the_marker_kernels_and_the_library_call_is_summed():
    text = _csv([
        ["0", "stray_kernel", "5", "1", "1", "1", "1", "0", "0"],
        ["1", "gap_case_0", "1000", "10", "10", "1", "1", "0", "0"],
        ["2", "sgemm_split_k<64, 64>", "120000", "200000", "150000", "60", "4000000", "0.9", "0.7"],
        ["3", "gap_case_1", "1000", "10", "10", "1", "1", "0", "0"],
        ["4", "cutlass_gemm_splitk", "90000", "160000", "152000", "80", "3000000", "0.2", "0.1"],
        ["5", "splitKreduce_kernel", "8000", "10000", "9000", "30", "100000", "0.1", "0.1"],
    ])  # fmt: skip
    by_case = gp.split_by_case(gp.parse_raw_csv(text).launches)
    assert sorted(by_case) == [0, 1]
    assert [r["Kernel Name"] for r in by_case[1]] == ["cutlass_gemm_splitk", "splitKreduce_kernel"]
    stalls = [STALL_LS, STALL_NI]
    lib = gp.side_summary(by_case[1], stalls)
    assert lib["total_us"] == 98.0 and lib["main_us"] == 90.0 and lib["name"] == "cutlass_gemm_splitk"
    assert lib["others"] == [("splitKreduce_kernel", 8.0)]
    assert abs(lib["sm_active_pct"] - 95.0) < 1e-9
    ours = gp.side_summary(by_case[0], stalls)
    assert ours["stalls"]["long_scoreboard"] == (0.9, 0.9 * 4_000_000)
    found = gp.findings(ours, lib)
    assert found[0].startswith("ours takes 1.22x")
    assert "idle SMs" in found[1]  # 75% active against 95%
    assert "long_scoreboard 3.6 M against 0.6 M" in found[3]
    text = gp.report([gp.case_from_text("float32:256:sgemm_split_k")], {0: by_case[0]}, {0: by_case[1]}, stalls, "# h")
    assert "+ splitKreduce_kernel (8.0 us)" in text and "stall long_scoreboard, cycles/issue" in text


def test_a_case_with_no_profile_says_so():
    text = gp.report([gp.case_from_text("float32:256:sgemm_split_k")], {}, {}, [], "# h")
    assert "not profiled" in text
    assert gp.findings({}, {"total_us": 1.0}) == ["one side has no profile: nothing to compare"]
