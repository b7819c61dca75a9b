"""The element-type table: one row per type, and the views read from it."""

from __future__ import annotations

from gemmlab.core.dtypes import (
    DTYPE_CTYPES,
    DTYPE_ITEMSIZE,
    DTYPES,
    TOLERANCE,
    b_input_type,
    c_itemsize,
    input_type,
    peak_type,
)


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


def test_inputs_of_each_operand_and_the_peak_a_result_is_a_share_of() -> None:
    assert [(input_type(d), b_input_type(d), peak_type(d)) for d in ("float32", "bfloat16-out", "e5m2-bf16")] == [
        ("float32", "float32", "float32"),
        ("bfloat16", "bfloat16", "bfloat16"),
        ("e5m2", "e5m2", "e5m2"),
    ]
    # The mixed FP8 pair: A e5m2, B e4m3, the pair's own peak whatever C is.
    for dtype in ("e5m2xe4m3", "e5m2xe4m3-bf16"):
        assert (input_type(dtype), b_input_type(dtype), peak_type(dtype)) == ("e5m2", "e4m3", "e5m2xe4m3")
    assert c_itemsize("e5m2xe4m3") == 4 and c_itemsize("e5m2xe4m3-bf16") == 2
