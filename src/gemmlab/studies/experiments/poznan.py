"""The Poznań 2014 course report (GeForce GT 240): five float32 matmul
versions, v4 in two flavours, measured at two groups of sizes."""

from __future__ import annotations

from gemmlab.studies.experiments.base import Experiment, Layout, Series, plot
from gemmlab.studies.reference import Published, PublishedTable

SOURCE = "Poznan 2014 course report (GeForce GT 240)"

TABLE = PublishedTable(
    "poznan2014_gt240.csv",
    {
        "v1": "single_block",
        "v2": "naive",
        "v3": "tiled",
        "v4a": "tiled_prefetch_reg",
        "v4b": "tiled_prefetch_smem",
        "v5": "tiled_2x2",
    },
)
PLOTS = (plot("vs_size"), plot("compare_largest"), plot("published_vs_ours"))
# The GT 240's compute capability, for the occupancy table of the document's GPU.
DOCUMENT_CC = "1.2"

# `tiled` (the report's v3) was measured in both groups, so each group takes
# only its own sizes of the table.
GROUP1 = Experiment(
    name="poznan-group1",
    title="Single block, naive and tiled float32 matmul, sizes 176-528",
    source_doc=SOURCE + ", versions 1-3",
    series=(Series(("single_block", "naive", "tiled"), (176, 352, 528), (8, 16, 22)),),
    published=Published(TABLE, frozenset({176, 352, 528})),
    layout=Layout(
        "Poznań 2014 report, sizes 176/352/528 (GeForce GT 240): one block, naive, tiled",
        PLOTS,
        document_cc=DOCUMENT_CC,
    ),
)

GROUP2 = Experiment(
    name="poznan-group2",
    title="Tiled matmul with prefetching and 2x2 outputs per thread, sizes 128-640",
    source_doc=SOURCE + ", versions 3-5",
    series=(
        Series(("tiled", "tiled_prefetch_reg", "tiled_prefetch_smem", "tiled_2x2"), (128, 256, 384, 512, 640), (8, 16)),
    ),
    published=Published(TABLE, frozenset({128, 256, 384, 512, 640})),
    layout=Layout(
        "Poznań 2014 report, sizes 128-640 (GeForce GT 240): tiled and its prefetching and 2x2 variants",
        PLOTS,
        document_cc=DOCUMENT_CC,
    ),
)
