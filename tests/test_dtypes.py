"""The element-type table: one row per type, and the views read from it."""

from __future__ import annotations

from gemmlab.core.dtypes import DTYPE_CTYPES, DTYPE_ITEMSIZE, DTYPES, TOLERANCE, c_itemsize


def test_one_row_per_type_and_the_views_agree() -> None:
    names = [d.name for d in DTYPES]
    assert len(names) == len(set(names))
    for d in DTYPES:
        assert (DTYPE_CTYPES[d.name], DTYPE_ITEMSIZE[d.name], TOLERANCE[d.name]) == (d.ctype, d.itemsize, d.tolerance)
        assert c_itemsize(d.name) == d.c_itemsize


def test_outputs_of_the_tensor_types() -> None:
    # 16-bit inputs accumulate into a float32 C, unless C is asked for in bfloat16.
    assert (c_itemsize("bfloat16"), c_itemsize("float16"), c_itemsize("bfloat16-out")) == (4, 4, 2)
    assert TOLERANCE["int32"] == 0.0 and all(t >= 0 for t in TOLERANCE.values())
