"""The source documents' experiments: one module per document, one list.

Each module here holds one document's experiments whole: their series
(kernels x sizes x block edges), the published figures they are compared
with (the document's CSV beside the module, with its kernel names mapped to
catalogue ids) and the layout of their report section. The shared types are
in :mod:`.base`; running them is :mod:`gemmlab.studies.reproduce`.

To add an experiment from a new document:

1. write ``<document>.py`` here, with an :class:`~.base.Experiment` whose
   ``published`` names a :class:`~gemmlab.studies.reference.PublishedTable`
   (or is None where the document printed no measurements) and whose
   ``layout`` picks its plots from ``report.plots.PLOTS``;
2. put the document's CSV beside it (``package-data`` already takes
   ``studies/experiments/*.csv``);
3. add the experiment to ``EXPERIMENTS`` below: the one line that makes
   ``gemmlab reproduce <name>`` and the report know it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gemmlab.core.errors import unknown_name
from gemmlab.studies.experiments import arequipa, brno, int32lab, kursk, poznan
from gemmlab.studies.experiments.base import Experiment

# In the order `reproduce` runs them and the report shows them.
EXPERIMENTS: tuple[Experiment, ...] = (
    poznan.GROUP1,
    poznan.GROUP2,
    int32lab.INT32_LAB,
    brno.BRNO_TRANSPOSE,
    arequipa.AREQUIPA_ANY_SIZE,
    kursk.KURSK_CPU_GPU,
)
_BY_NAME = {e.name: e for e in EXPERIMENTS}


def names() -> list[str]:
    return list(_BY_NAME)


def get(name: str) -> Experiment:
    try:
        return _BY_NAME[name]
    except KeyError:
        listing = f"`gemmlab reproduce --list` shows all {len(_BY_NAME)}."
        raise unknown_name("experiment", name, _BY_NAME, listing, cutoff=0.4) from None


def find(name: str) -> Experiment | None:
    """The experiment of that name, or None for results stored under a name of
    the user's own (``gemmlab sweep --experiment``), which no document has."""
    return _BY_NAME.get(name)


def select(requested: Sequence[str] | None) -> list[Experiment]:
    """The named experiments (all of them for none), each checked before any runs."""
    return [get(n) for n in requested] if requested else list(EXPERIMENTS)
