"""Element types: the C type a kernel is instantiated with, the bytes of an
input element and of an output element, and the error a correct result may
have. One table; the dicts below are views of it."""

from __future__ import annotations

# The tensor-core types name tag structs of kernels/tensor/tc_common.cuh: bf16
# and fp16 are stored as 16-bit patterns, tf32 as ordinary float32. Their C is
# float32, except for "bfloat16-out": bfloat16 inputs, FP32 accumulation,
# bfloat16 C.
DTYPE_CTYPES = {
    "float32": "float", "float64": "double", "int32": "int",
    "bfloat16": "gl_bf16", "float16": "gl_fp16", "tf32": "gl_tf32", "bfloat16-out": "gl_bf16_out",
}  # fmt: skip
# Bytes of one element of the inputs.
DTYPE_ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4, "bfloat16": 2, "float16": 2, "tf32": 4, "bfloat16-out": 2}
# Bytes of one element of C, where it is not an input element.
C_ITEMSIZE = {"bfloat16": 4, "float16": 4, "tf32": 4, "bfloat16-out": 2}


def c_itemsize(dtype: str) -> int:
    return C_ITEMSIZE.get(dtype, DTYPE_ITEMSIZE[dtype])


# ||C - C_ref|| / ||C_ref|| bounds per dtype. float32 with float32 accumulation
# over K terms lands near sqrt(K) * 2^-24 relative error (about 1e-6 at K = 16384);
# 1e-5 leaves room without letting a wrong index through (those give errors of
# order 1). int32 must be exact.
#
# Tensor-core types (gemmlab.kernels.tensor.spec): the reference is computed from the exact
# values of the stored bf16/fp16 inputs, so only the FP32 accumulation errs;
# 1e-4 leaves room for the tensor cores' accumulation order. tf32 inputs keep
# 10 mantissa bits (unit roundoff 2^-11 rounded, 2^-10 truncated): a relative
# error of about 1e-3 per product, so 4e-3. "bfloat16-out" rounds each sum to
# bfloat16 (unit roundoff 2^-9, about 2e-3 at most, about 1e-3 on average over
# uniformly spread roundings), so 4e-3 as well.
TOLERANCE = {
    "float32": 1e-5, "float64": 1e-12, "int32": 0.0,
    "bfloat16": 1e-4, "float16": 1e-4, "tf32": 4e-3, "bfloat16-out": 4e-3,
}  # fmt: skip
