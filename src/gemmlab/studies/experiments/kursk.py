"""The Kursk 2014 paper (GTS 450, GTX 770): CPU against GPU with the copies
to and from the GPU counted in the time."""

from __future__ import annotations

from gemmlab.studies.experiments.base import Experiment, Layout, Series, plot
from gemmlab.studies.points import E2E
from gemmlab.studies.reference import Published, PublishedTable

SIZES = (256, 512, 1024, 2048)

# The paper's naive kernel takes the row from threadIdx.x, which is our
# uncoalesced variant, not `naive`.
TABLE = PublishedTable(
    "kursk2014_cpu_gpu.csv",
    {
        "gpu_naive": "naive_uncoalesced",
        "gpu_col_buffered": "col_buffered",
        "gpu_row_buffered": "row_buffered",
        "gpu_blocked": "tiled",
        "gpu_blocked_unroll4": "blocked_x4",
        "cpu_naive": "cpu_naive",
    },
)

KURSK_CPU_GPU = Experiment(
    name="kursk-cpu-gpu",
    title="CPU against GPU with the copies counted: P = 2N^3 / (t_in + t_kernel + t_out)",
    source_doc="Kursk 2014 paper (GTS 450, GTX 770)",
    series=(
        Series(("naive_uncoalesced",), SIZES, (32,), variant=E2E),
        Series(("col_buffered", "row_buffered"), SIZES, variant=E2E),
        Series(("tiled",), SIZES, (1, 2, 4, 8, 16, 32), variant=E2E),
        Series(("blocked_x4",), SIZES, (4, 8, 16, 32), variant=E2E),
        Series(
            ("cpu_naive",),
            SIZES,
            max_size=1024,
            max_size_reason="the single-thread naive loop at 2048 takes minutes (the paper: 103 s); it stops at 1024",
        ),
        Series(("cpu_blocked", "cpu_blas"), SIZES),
    ),
    published=Published(TABLE),
    layout=Layout(
        "Kursk 2014 paper (GTS 450, GTX 770): CPU against GPU, copies included",
        (
            plot("cpu_gpu"),
            plot("time_vs_edge", kernels=("tiled", "blocked_x4")),
            plot("compare_largest"),
            plot("published_vs_ours"),
        ),
        # The paper's times and GFLOPS include the copies, so they sit beside
        # our end-to-end figures.
        published_metrics={"e2e_time": "time_ms", "e2e_gflops": "gflops"},
    ),
    notes=(
        "GPU rows are end to end: variant 'pinned' and 'pageable' (host memory), median_ms the kernel alone.",
        "col_buffered and row_buffered launch one thread per row or column, so they stop at N = 1024.",
    ),
)
