"""What `gemmlab profile` does: one verified launch of a kernel under Nsight
Compute (:mod:`gemmlab.measure.ncu`), its counters beside the models.

:func:`profile` measures; :class:`ProfileResult` holds the figures, and
:func:`generic_figures` names the registry's figures that a table shows
after the ones it lays out itself."""

from __future__ import annotations

from gemmlab.measure.ncu.command import DEFAULT_TIMEOUT_S, profile_point
from gemmlab.measure.ncu.metrics import ProfileResult, generic_figures

__all__ = ["DEFAULT_TIMEOUT_S", "ProfileResult", "generic_figures", "profile"]

# One verified launch of a kernel under Nsight Compute, allowed a timeout: the
# command's whole job, done in the measuring layer (its errors are named there).
profile = profile_point
