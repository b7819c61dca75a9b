"""The Arequipa 2017 lab report: a tiled kernel for sizes that are not
multiples of the tile. The report printed no measurements."""

from __future__ import annotations

from gemmlab.studies.experiments.base import Experiment, Layout, Series, plot

AREQUIPA_ANY_SIZE = Experiment(
    name="arequipa-any-size",
    title="Tiled matmul with zero-filled edges on sizes that are not multiples of the tile",
    source_doc="Arequipa 2017 lab report",
    series=(Series(("tiled_any_size",), (1000, 1023, 1025), (8, 16, 32)),),
    published=None,
    layout=Layout(
        "Arequipa 2017 report: a tiled kernel for any size (no published measurements)",
        (plot("vs_size"), plot("compare_largest")),
    ),
)
