"""CUPTI's records read straight from their bytes (measure/activity.py), at
the offsets of cupti-python's own layouts: checked on records laid out in
host memory, no GPU needed."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from gemmlab.measure import activity

cupti = pytest.importorskip("cupti.cupti", reason="cupti-python is not installed")


def _record(cls: str, layout: str, **fields: int) -> tuple[object, np.ndarray]:
    """A record of class ``cls`` (CUPTI's name for it) laid out as ``layout`` in host memory."""
    buffer = np.zeros(1, dtype=getattr(cupti, layout))
    for name, value in fields.items():
        buffer[name] = value
    record = type(cls, (), {"ptr": buffer.ctypes.data})()
    return record, buffer


def test_each_kind_kept_is_read_from_its_bytes() -> None:
    reader = activity._readers(cupti)
    name = ctypes.create_string_buffer(b"sgemm_padded_b")
    kernel, _k = _record("ActivityKernel10", "activity_kernel10_dtype", start=100, end=250, correlation_id=7,
                         name=ctypes.addressof(name))  # fmt: skip
    names: dict[int, str] = {}
    assert reader(kernel)(kernel, names) == ("kernel", "sgemm_padded_b", 100, 250, 0, 7)
    copy, _c = _record("ActivityMemcpy6", "activity_memcpy6_dtype", start=5, end=9, correlation_id=8)
    assert reader(copy)(copy, names) == ("memcpy", "memcpy", 5, 9, 0, 8)
    tag, _t = _record("ActivityExternalCorrelation", "activity_external_correlation_dtype", correlation_id=7,
                      external_id=activity.tag(activity.CALL, 3))  # fmt: skip
    assert reader(tag)(tag, names) == ("external", 7, activity.tag(activity.CALL, 3))
    api, _a = _record("ActivityAPI", "activity_api_dtype", correlation_id=7)
    assert reader(api) is None  # not kept
    trace = activity._trace(cupti, [reader(kernel)(kernel, names), reader(tag)(tag, names)])
    assert trace.activities == [activity.Activity("kernel", "sgemm_padded_b", 100, 250, 0, 7)]
    assert trace.external == {7: activity.tag(activity.CALL, 3)}
