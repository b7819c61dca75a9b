"""The 2023 int32 GEMM lab report: naive and shared-memory kernels against
the block edge, and a CPU comparison; beside them, beyond the report, the
int8 tensor-core rungs (int8 products summed in int32, exact) that integer
GEMM on a GPU has become."""

from __future__ import annotations

from gemmlab.studies.experiments.base import Experiment, Layout, Series, plot
from gemmlab.studies.reference import Published, PublishedTable

# Not in the 2023 report: kernels/lowp's int8 rungs (mma.sync on sm_80 and up, wgmma on sm_90a).
TENSOR_CORE_INT8 = ("tc_int8_mma", "tc_int8_wgmma")

TABLE = PublishedTable("int32lab_gemm.csv", {"naive_i32": "naive_i32", "shared_i32": "tiled_i32"})

INT32_LAB = Experiment(
    name="int32-lab",
    title="int32 GEMM, naive and shared-memory kernels, block edge 1-32",
    source_doc="2023 int32 GEMM lab report",
    series=(
        Series(("naive_i32", "tiled_i32"), (256, 512, 1024, 4096), (1, 2, 4, 8, 16, 32)),
        Series(
            ("cpu_blocked",),
            (256, 512, 1024, 4096),
            dtype="int32",
            max_size=1024,
            max_size_reason="the single-thread CPU loop at 4096 takes about a minute; it stops at 1024",
        ),
        # Beyond the report: int8 inputs (the report's are int32), int32 sums, on the tensor cores.
        Series(TENSOR_CORE_INT8, (256, 512, 1024, 4096), dtype="int8"),
    ),
    published=Published(TABLE),
    layout=Layout(
        "2023 int32 GEMM lab report: naive and shared-memory kernels against block edge",
        (
            plot("time_vs_edge", kernels=("naive_i32", "tiled_i32")),
            plot("speedup", slow="naive_i32", fast="tiled_i32", edge=32),
            plot("compare_largest"),
            plot("published_vs_ours"),
        ),
    ),
    notes=(
        "The report's CPU comparison is a sentence, not a number; cpu_blocked (int32) stands in for it.",
        "Beyond the report: tc_int8_mma and tc_int8_wgmma multiply int8 (not int32) inputs on the tensor cores and "
        "sum them exactly in int32; they take no block edge, and tc_int8_wgmma runs only on sm_90 (Hopper).",
    ),
)
