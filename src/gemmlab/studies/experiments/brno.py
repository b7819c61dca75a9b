"""The Brno 2014 lecture (GeForce GTX 280): vector addition, copies and
transposes, in GB/s."""

from __future__ import annotations

from gemmlab.studies.experiments.base import Experiment, Layout, Series, matrix_or_vector, plot
from gemmlab.studies.reference import Published, PublishedTable

# The CSV already uses our ids, except the kernel that reads and writes with
# a stride, which serves only as a worst case there.
TABLE = PublishedTable(
    "brno2014_transpose_gtx280.csv",
    {
        "transpose_naive": "transpose_naive",
        "copy": "copy",
        "transpose_tiled": "transpose_tiled",
        "copy_tiled": "copy_tiled",
        "transpose_tiled_padded": "transpose_tiled_padded",
        "transpose_strided_both": None,
    },
)

BRNO_TRANSPOSE = Experiment(
    name="brno-transpose",
    title="Vector addition, copies and transposes in GB/s, 4000x4000 and a matrix far larger than L2",
    source_doc="Brno 2014 lecture (GeForce GTX 280)",
    series=(
        Series(("vecadd",), (4000, 16384), shape=matrix_or_vector),
        Series(
            ("copy", "transpose_naive", "copy_tiled", "transpose_tiled", "transpose_tiled_padded"),
            (4000, 16384),
            (16, 32),
            shape=matrix_or_vector,
        ),
    ),
    published=Published(TABLE),
    layout=Layout(
        "Brno 2014 lecture (GeForce GTX 280): transposes against copies, in GB/s",
        (plot("bandwidth_bars"), plot("compare_largest"), plot("published_vs_ours")),
    ),
    notes=("16384 x 16384 float32 is 1 GiB per matrix, many times any GPU's L2, so the inputs stream from DRAM.",),
)
