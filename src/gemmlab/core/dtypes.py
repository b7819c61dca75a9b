"""Element types: the C type a kernel is instantiated with, the bytes of an
input element and of an output element, and the error a correct result may
have. One table (:data:`DTYPES`); the dicts below it are views of it, for the
code that looks one figure up by name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dtype:
    """One element type as gemmlab uses it."""

    name: str
    ctype: str  # the C++ type a kernel template is instantiated with
    itemsize: int  # bytes of one element of the inputs
    c_itemsize: int  # bytes of one element of C
    # The most ||C - C_ref|| / ||C_ref|| a correct result may have (the derivation is below the table).
    tolerance: float
    # The type of A and B where it is not ``name`` (a second C type of the same
    # inputs): the tensor cores run, and their measured peak is, that type's.
    inputs: str | None = None
    # B's type where it is not A's (an FP8 pair: e5m2 gradients times e4m3 weights).
    b_inputs: str | None = None


# The tensor-core types name tag structs of kernels/tensor/tc_common.cuh: bf16
# and fp16 are stored as 16-bit patterns, tf32 as ordinary float32. Their C is
# float32, except for "bfloat16-out": bfloat16 inputs, FP32 accumulation,
# bfloat16 C.
DTYPES: tuple[Dtype, ...] = (
    Dtype("float32", "float", 4, 4, 1e-5),
    Dtype("float64", "double", 8, 8, 1e-12),
    Dtype("int32", "int", 4, 4, 0.0),
    Dtype("bfloat16", "gl_bf16", 2, 4, 1e-4),
    Dtype("float16", "gl_fp16", 2, 4, 1e-4),
    Dtype("tf32", "gl_tf32", 4, 4, 4e-3),
    Dtype("bfloat16-out", "gl_bf16_out", 2, 2, 4e-3, inputs="bfloat16"),
    # The 8-bit types of kernels/lowp (tags in lowp/lowp.cuh): int8 products
    # summed in int32, exact; FP8 (OCP e4m3 and e5m2) with scales, summed in
    # FP32, float32 C. FP8's tolerance depends on how many K the tensor core
    # sums before the kernel adds into FP32 registers: problems/lowp.py derives
    # it per point (fp8_tolerance); the figure here is its floor.
    Dtype("int8", "gl_s8", 1, 4, 0.0),
    Dtype("e4m3", "gl_e4m3", 1, 4, 1e-4),
    Dtype("e5m2", "gl_e5m2", 1, 4, 1e-4),
    # FP8 inputs, FP32 sums, C rounded to bfloat16 (the persistent FP8 rungs'
    # second C type): FP8's summation error plus bfloat16-out's rounding.
    Dtype("e4m3-bf16", "gl_e4m3_bf16", 1, 2, 4e-3, inputs="e4m3"),
    Dtype("e5m2-bf16", "gl_e5m2_bf16", 1, 2, 4e-3, inputs="e5m2"),
    # A in e5m2, B in e4m3: training's backward pass, where gradients (e5m2's
    # range) meet weights or activations (e4m3's precision). The products are
    # exact in FP32 as the others are, so the tolerances are the same.
    Dtype("e5m2xe4m3", "gl_e5m2_e4m3", 1, 4, 1e-4, inputs="e5m2", b_inputs="e4m3"),
    Dtype("e5m2xe4m3-bf16", "gl_e5m2_e4m3_bf16", 1, 2, 4e-3, inputs="e5m2", b_inputs="e4m3"),
)
# The tolerances. float32 with float32 accumulation over K terms lands near
# sqrt(K) * 2^-24 relative error (about 1e-6 at K = 16384); 1e-5 leaves room
# without letting a wrong index through (those give errors of order 1). int32
# must be exact.
#
# Tensor-core types (gemmlab.kernels.tensor.spec): the reference is computed
# from the exact values of the stored bf16/fp16 inputs, so only the FP32
# accumulation errs; 1e-4 leaves room for the tensor cores' accumulation order.
# tf32 inputs keep 10 mantissa bits (unit roundoff 2^-11 rounded, 2^-10
# truncated): a relative error of about 1e-3 per product, so 4e-3.
# "bfloat16-out" rounds each sum to bfloat16 (unit roundoff 2^-9, about 2e-3 at
# most, about 1e-3 on average over uniformly spread roundings), so 4e-3 as well.
#
# 8-bit types (gemmlab.kernels.lowp.spec): int8 sums are exact in int32, so
# 0. FP8's reference is built from the decoded codes times their scales, so
# only the sums err; Hopper's FP8 tensor cores keep about 14 significant bits
# when they add into the accumulator (DeepSeek-V3, 3.3.2), up to 2^-13 of the
# running sum per K = 32 step. A kernel whose tensor cores sum `chain` K
# before it adds into FP32 registers is allowed 1e-4 + (chain / 32) x 2^-13:
# 5.9e-4 when it promotes every 128 K, 1.6e-2 at K = 4096 when it never does
# (problems/lowp.py's fp8_tolerance; the table's 1e-4 is the FP32 floor).

DTYPE_CTYPES = {d.name: d.ctype for d in DTYPES}
DTYPE_ITEMSIZE = {d.name: d.itemsize for d in DTYPES}
TOLERANCE = {d.name: d.tolerance for d in DTYPES}


def c_itemsize(dtype: str) -> int:
    """Bytes of one element of C for ``dtype``."""
    return _C_ITEMSIZE[dtype]


_C_ITEMSIZE = {d.name: d.c_itemsize for d in DTYPES}


def input_type(dtype: str) -> str:
    """The element type of A (and of B, unless b_input_type says otherwise) for
    ``dtype`` (bfloat16-out: bfloat16; e4m3-bf16: e4m3; e5m2xe4m3: e5m2); a
    name not in the table is its own."""
    return _INPUTS.get(dtype) or dtype


def b_input_type(dtype: str) -> str:
    """The element type of B for ``dtype`` (e5m2xe4m3: e4m3; else A's)."""
    return _B_INPUTS.get(dtype) or input_type(dtype)


def peak_type(dtype: str) -> str:
    """The type whose measured tensor-core peak a ``dtype`` result is a share of:
    its inputs' (e4m3-bf16: e4m3), or its pair's (e5m2xe4m3-bf16: e5m2xe4m3)."""
    a, b = input_type(dtype), b_input_type(dtype)
    return a if a == b else f"{a}x{b}"


_INPUTS = {d.name: d.inputs for d in DTYPES}
_B_INPUTS = {d.name: d.b_inputs for d in DTYPES}


# A user's float16 or bfloat16 matmul keeps C in its own type (the tensor-core
# rows above keep a float32 C). The reference is computed from the exact values
# of the stored inputs, so what a correct kernel errs by is the rounding of each
# element of C to the type, at most the unit roundoff u (2^-11 for float16,
# 2^-8 for bfloat16) and about u/2 in RMS, plus FP32 accumulation, which is
# negligible beside it. Twice u leaves room for the rounding. A kernel that
# accumulates in the 16-bit type adds about 0.4 * u * sqrt(K) and fails from
# K of a few dozen: it should accumulate in float, as cuBLAS and the tensor cores do.
SAME_TYPE_C_TOLERANCE = {"float16": 2 * 2.0**-11, "bfloat16": 2 * 2.0**-8}
