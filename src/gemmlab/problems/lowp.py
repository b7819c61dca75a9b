"""GEMM in 8-bit types on the tensor cores, C = A . B^T (A M x K, B N x K,
both K-major, the tensor ladder's layout): int8 products summed in int32,
and FP8 (e4m3, e5m2) with scales, summed in FP32.

CuPy has no FP8 type, so FP8 operands live as their bytes (uint8) and the
codec below turns float data into codes and codes back into the exact values
they stand for. An FP8 operand is the quantisation of float data whose range
would overflow e4m3 (up to 10^4, e4m3's largest value is 448), with scales in
one of three modes:

- ``tensor``: one float32 for A, one for B;
- ``rowcol``: one per row of A (scale_a[M]) and one per row of B, i.e. per
  column of C (scale_b[N]);
- ``block``: DeepGEMM's blocks, one per row of A per 128-wide block of K, and
  one per 128 x 128 block of B. Both are stored with the K block first
  (scale_a[kb][M], scale_b[kb][ceil(N / 128)]), so that the scales a block of
  threads needs for one K block lie side by side.

The reference is float64 from the decoded values times their scales: exactly
the sum the kernel approximates, so the error measured is the kernel's
accumulation alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gemmlab.core.dtypes import b_input_type, c_itemsize, input_type
from gemmlab.core.extras import MissingExtra, require
from gemmlab.problems.base import (
    GemmOperands,
    Operand,
    Prepared,
    Problem,
    Sketch,
    Stackable,
    drawn,
    gemm_sketch,
    guard_bytes,
    guarded_empty,
    poison,
    poison_left,
    relative_error,
    values,
)

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point


INT8 = "int8"
FP8 = ("e4m3", "e5m2")
# FP8 inputs with a bfloat16 C: the name says both (core/dtypes.py's `inputs`).
E4M3_BF16 = "e4m3-bf16"
E5M2_BF16 = "e5m2-bf16"
FP8_WITH_BF16 = (*FP8, E4M3_BF16, E5M2_BF16)
# A in e5m2 times B in e4m3 (core/dtypes.py's `b_inputs`), float32 or bfloat16 C.
MIXED = ("e5m2xe4m3", "e5m2xe4m3-bf16")
# An FP8 type whose C is 2 bytes stores it in bfloat16.
BF16_C = tuple(d for d in (*FP8_WITH_BF16, *MIXED) if c_itemsize(d) == 2)
# The FP8 pairs (A's format, B's) cuBLASLt multiplies: every one but e5m2 x e5m2.
LIBRARY_PAIRS = (("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2"))
SCALINGS = ("tensor", "rowcol", "block")
# K per scale block (and rows per block of B's scales): DeepGEMM's 128, which
# is also one 128-byte swizzled row of an 8-bit tile, so a kernel meets one K
# block per tile.
SCALE_BLOCK = 128
# int8 C: every |product| is at most 128 x 128 = 2^14, so a sum over K fits
# int32 while K < 2^17, and float64 (53 bits) holds every such sum exactly.
INT8_MAX_K = 2**31 // 2**14 - 1


# --- FP8: the two OCP formats ------------------------------------------------------


@dataclass(frozen=True)
class Fp8Format:
    """One FP8 format: sign, ``exponent_bits`` with ``bias``, ``mantissa_bits``.
    ``ieee_specials``: the top exponent holds infinities and NaNs (e5m2); else
    only S.1111.111 is NaN and the top exponent holds numbers (e4m3, "fn")."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    ieee_specials: bool

    @property
    def max_code(self) -> int:
        """The code of the largest finite value (0x7E for e4m3, 0x7B for e5m2)."""
        return 0x7B if self.ieee_specials else 0x7E

    @property
    def max_value(self) -> float:
        return float(decode(np, np.array([self.max_code], np.uint8), self)[0])


E4M3 = Fp8Format("e4m3", 4, 3, 7, ieee_specials=False)
E5M2 = Fp8Format("e5m2", 5, 2, 15, ieee_specials=True)
FORMATS = {f.name: f for f in (E4M3, E5M2)}


def decode(xp: Any, codes: Any, fmt: Fp8Format) -> Any:
    """FP8 codes (uint8) -> their exact float64 values (NaN, and e5m2's infinities, included)."""
    c = codes.astype(xp.int32)
    exponent = (c >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    fraction = (c & ((1 << fmt.mantissa_bits) - 1)).astype(xp.float64) / (1 << fmt.mantissa_bits)
    # Subnormals (exponent field 0) have no implicit 1 and the exponent of the smallest normal.
    magnitude = xp.where(
        exponent == 0,
        fraction * 2.0 ** (1 - fmt.bias),
        (1.0 + fraction) * xp.exp2((exponent - fmt.bias).astype(xp.float64)),
    )
    top = exponent == (1 << fmt.exponent_bits) - 1
    if fmt.ieee_specials:
        magnitude = xp.where(top, xp.where(fraction == 0, xp.inf, xp.nan), magnitude)
    else:
        magnitude = xp.where(top & (fraction == 1 - 2.0**-fmt.mantissa_bits), xp.nan, magnitude)
    return xp.where((c & 0x80) != 0, -magnitude, magnitude)


def encode(xp: Any, x: Any, fmt: Fp8Format) -> Any:
    """float values -> FP8 codes (uint8), rounded to nearest with ties to the
    even code, as cvt.rn.satfinite does: magnitudes past the largest finite
    value become it, NaN becomes a NaN code."""
    x = xp.asarray(x, dtype=xp.float64)
    table = decode(xp, xp.arange(fmt.max_code + 1, dtype=xp.uint8), fmt)  # increasing with the code
    size = xp.minimum(xp.abs(x), fmt.max_value)
    above = xp.clip(xp.searchsorted(table, size, side="left"), 0, fmt.max_code)
    below = xp.maximum(above - 1, 0)
    to_above, to_below = table[above] - size, size - table[below]
    # The even code has a 0 mantissa LSB: at a tie it is the round-to-nearest-even choice.
    pick_above = (to_above < to_below) | ((to_above == to_below) & (above % 2 == 0))
    code = xp.where(pick_above, above, below).astype(xp.uint8)
    code = xp.where(xp.signbit(x), code | 0x80, code).astype(xp.uint8)
    return xp.where(xp.isnan(x), 0x7F, code).astype(xp.uint8)


# --- scales -------------------------------------------------------------------------


def scale_groups(scaling: str, rows: int, k: int, rows_per_group: int) -> tuple[int, int]:
    """(row groups, K groups) that share one scale: one group for ``tensor``,
    one per row for ``rowcol``, rows_per_group x 128 blocks for ``block``."""
    if scaling == "tensor":
        return 1, 1
    if scaling == "rowcol":
        return rows, 1
    return -(-rows // rows_per_group), -(-k // SCALE_BLOCK)


def expand(xp: Any, group_scales: Any, rows: int, k: int, scaling: str, rows_per_group: int) -> Any:
    """The rows x k array of each element's scale, from the (row groups, K groups) scales."""
    if scaling != "block":  # one scale, or one per row
        return xp.broadcast_to(group_scales[:, :1], (rows, k))
    per_row = xp.repeat(group_scales, rows_per_group, axis=0)[:rows]
    return xp.repeat(per_row, SCALE_BLOCK, axis=1)[:, :k]


def group_max(xp: Any, x: Any, scaling: str, rows_per_group: int) -> Any:
    """The largest |x| of each scale group, as (row groups, K groups)."""
    rows, k = x.shape
    groups_r, groups_k = scale_groups(scaling, rows, k, rows_per_group)
    if scaling != "block":
        return xp.abs(x).reshape(groups_r, -1).max(axis=1).reshape(groups_r, 1)
    padded = xp.zeros((groups_r * rows_per_group, groups_k * SCALE_BLOCK), dtype=x.dtype)
    padded[:rows, :k] = xp.abs(x)
    return padded.reshape(groups_r, rows_per_group, groups_k, SCALE_BLOCK).max(axis=(1, 3))


@dataclass
class Quantised:
    """An FP8 operand: its codes, its scales as the kernel reads them, and the
    float64 value of every element (decoded code times scale)."""

    codes: Any  # rows x k, uint8
    scales: Any  # float32: (1,), (rows,), or (K groups, row groups) for block scaling
    exact: Any  # rows x k, float64


def quantise(xp: Any, x: Any, fmt: Fp8Format, scaling: str, rows_per_group: int) -> Quantised:
    """Float data as FP8 codes with a float32 scale per group: each group's
    largest magnitude maps to the format's largest value."""
    rows, k = x.shape
    amax = group_max(xp, x, scaling, rows_per_group)
    scales = xp.where(amax > 0, amax / fmt.max_value, 1.0).astype(xp.float32)
    full = expand(xp, scales.astype(xp.float64), rows, k, scaling, rows_per_group)
    codes = encode(xp, x / full, fmt)
    stored = scales.ravel() if scaling != "block" else xp.ascontiguousarray(scales.T)
    return Quantised(codes, stored, decode(xp, codes, fmt) * full)


def draw(xp: Any, rng: Any, rows: int, k: int) -> Any:
    """Float data whose scale changes from row to row and from one 128-wide K
    block to the next (magnitudes 10 to 10^4: e4m3 unscaled would overflow),
    so that every scaling mode has something to do."""
    blocks = -(-k // SCALE_BLOCK)
    magnitude = 10.0 ** rng.uniform(1.0, 4.0, size=(rows, blocks))
    return rng.uniform(-1.0, 1.0, size=(rows, k)) * xp.repeat(magnitude, SCALE_BLOCK, axis=1)[:, :k]


# --- tolerance -----------------------------------------------------------------------

# The inputs are exact (the reference is computed from the decoded values and
# their scales), so a correct FP8 kernel errs only in its sums. FP32 sums give
# about sqrt(K) * 2^-24 (FP32_FLOOR, as for the 16-bit tensor types). Hopper's
# FP8 tensor cores do not sum in full FP32: DeepSeek-V3 (section 3.3.2) finds
# about 14 significant bits kept when a wgmma adds its products into the
# accumulator, which is why kernels move ("promote") their partial sums into
# FP32 registers every few K steps. One such step (K = 32 for 8-bit types)
# errs by up to 2^-13 of the running sum; over ``chain`` K summed inside the
# tensor core that bounds the relative error by (chain / 32) x 2^-13, growing
# linearly in the worst case (truncation errs one way). A kernel that promotes
# every 128 K is allowed 1e-4 + 4 x 2^-13 = 5.9e-4; one that never promotes is
# allowed 1.6e-2 at K = 4096. A bug (a wrong index, a missed tile, a scale
# applied to the wrong block) errs by the order of the values themselves.
FP32_FLOOR = 1e-4
STEP_K = 32
STEP_ERROR = 2.0**-13


# A bfloat16 C adds its rounding (unit roundoff 2^-9): 4e-3, the tensor
# ladder's bfloat16-out figure (core/dtypes.py).
BF16_C_ROUNDING = 4e-3


def fp8_tolerance(chain: int, bf16_c: bool = False) -> float:
    """The most relative error an FP8 kernel may have when its tensor cores
    sum ``chain`` K at a time before an add into FP32 registers, and C is
    float32 or (``bf16_c``) rounded to bfloat16."""
    return FP32_FLOOR + max(1, chain // STEP_K) * STEP_ERROR + (BF16_C_ROUNDING if bf16_c else 0.0)


def fp8_inputs(dtype: str) -> tuple[str, str]:
    """The FP8 formats of A and of B (e5m2xe4m3: e5m2 and e4m3; e4m3-bf16: e4m3 twice)."""
    return input_type(dtype), b_input_type(dtype)


# --- the baselines (PyTorch, optional) -----------------------------------------------------

TORCH_PURPOSE = "The FP8 and INT8 baselines (torch._scaled_mm, torch._int_mm)"


def torch_block_scales(torch: Any, scale_a: Any, scale_b: Any) -> tuple[Any, Any]:
    """Stored block scales (scale_a[kb][m], scale_b[kb][nb]) as torch._scaled_mm
    takes them: A's an M x K/128 view, M-major (no copy); B's K/128 x N/128,
    K-major (a copy)."""
    return torch.from_dlpack(scale_a).t(), torch.from_dlpack(scale_b).t().contiguous().t()


def torch_rowcol_scales(torch: Any, scale_a: Any, scale_b: Any) -> tuple[Any, Any]:
    """Stored row/column scales (scale_a[M], scale_b[N]) as torch._scaled_mm's
    row-wise form takes them: A's an M x 1 view, B's a 1 x N view (no copies)."""
    return torch.from_dlpack(scale_a).reshape(-1, 1), torch.from_dlpack(scale_b).reshape(1, -1)


def torch_baseline(
    cp: Any, point: Point, a: Any, b: Any, scales: tuple[Any, Any] | None, scaling: str = "tensor"
) -> Callable[[], None]:
    """C = A . B^T by PyTorch on the current CuPy stream: torch._int_mm for
    int8 (int32 C), torch._scaled_mm for e4m3 with per-tensor scales or
    DeepGEMM's blocks (C float32, or bfloat16 for e4m3-bf16). MissingExtra
    naming the ``torch`` extra when PyTorch is not installed.

    Block scales as cuBLASLt takes them (found on an H100 with PyTorch 2.11,
    checked against the float64 reference, 2026-11-24): A's as an M x K/128
    view that is M-major, which is how they are stored (scale_a[kb][m]); B's
    as a K/128 x N/128 view that is K-major, a copy of the stored
    scale_b[kb][nb] made once here (so a redraw of the inputs leaves the
    baseline's B scales as they were: its time, not its result, is used)."""
    torch = require("torch", "torch", TORCH_PURPOSE)
    ta = torch.from_dlpack(a)
    tb = torch.from_dlpack(b).t()  # K x N, column-major: the layout both routines want for their second operand
    if point.dtype == INT8:

        def product() -> Any:
            return torch._int_mm(ta, tb)
    else:
        kinds = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
        fa, fb = fp8_inputs(point.dtype)
        ta, tb = ta.view(kinds[fa]), tb.view(kinds[fb])
        if scaling == "block":
            sa, sb = torch_block_scales(torch, *scales)
        elif scaling == "rowcol":
            sa, sb = torch_rowcol_scales(torch, *scales)
        else:
            sa, sb = (torch.from_dlpack(s).reshape(()) for s in scales)
        out = torch.bfloat16 if point.dtype in BF16_C else torch.float32

        def product() -> Any:
            return torch._scaled_mm(ta, tb, scale_a=sa, scale_b=sb, out_dtype=out)

    def call() -> None:
        with torch.cuda.stream(torch.cuda.ExternalStream(cp.cuda.get_current_stream().ptr)):
            product()

    return call


def baseline_for(cp: Any, point: Point, scaling: str, a: Any, b: Any, scales: Any) -> tuple[Any, str | None]:
    """The library routine for the same work and its name, or (None, None):
    PyTorch not installed, or no routine in these types, scaling and shape
    (torch._int_mm: M > 16, K and N multiples of 8; torch._scaled_mm: any
    FP8 pair but e5m2 x e5m2, which cuBLASLt does not multiply, with
    per-tensor scales and every size a multiple of 16; e4m3 or e5m2 x e4m3
    with row/column scales likewise and a bfloat16 C only, the one C type
    PyTorch takes for them; e4m3 with block scales and every size a multiple
    of 128. The pairs named are the ones tried against the float64 reference.)"""
    s = point.shape
    if point.dtype == INT8:
        fits, name = s.m > 16 and s.k % 8 == 0 and s.n % 8 == 0, "PyTorch torch._int_mm (cuBLASLt), int32 C"
    else:
        step = {"tensor": 16, "rowcol": 16, "block": SCALE_BLOCK}.get(scaling)
        pair = fp8_inputs(point.dtype)
        pairs = {"tensor": LIBRARY_PAIRS, "rowcol": LIBRARY_PAIRS[:2]}.get(scaling, LIBRARY_PAIRS[:1])
        fits = pair in pairs and step is not None and all(d % step == 0 for d in (s.m, s.n, s.k))
        fits = fits and (scaling != "rowcol" or point.dtype in BF16_C)
        c_type = "bfloat16" if point.dtype in BF16_C else "float32"
        kinds = {"block": "1 x 128 / 128 x 128 block scales", "rowcol": "row/column scales"}
        kind = kinds.get(scaling, "per-tensor scales")
        # Row-wise scaling is PyTorch's own kernel on some versions, cuBLASLt's on others: not named as either.
        library = "" if scaling == "rowcol" else " (cuBLASLt)"
        inputs = pair[0] if pair[0] == pair[1] else " x ".join(pair)
        name = f"PyTorch torch._scaled_mm{library} {inputs}, {kind}, {c_type} C"
    if not fits:
        return None, None
    try:
        return torch_baseline(cp, point, a, b, scales, scaling), name
    except MissingExtra:
        return None, None


# --- preparing a point -------------------------------------------------------------------


def _tensor_maps(a: Any, b: Any, boxes: tuple[int, int]) -> tuple[Any, Any]:
    """TMA descriptors of the byte arrays: boxes of rows x 128 bytes (128 elements), 128-byte swizzle."""
    from gemmlab.problems.tensor import _tensor_map

    return _tensor_map(a.view(np.uint8), boxes[0], False), _tensor_map(b.view(np.uint8), boxes[1], False)


def _int8_inputs(cp: Any, rng: Any, rows: int, k: int) -> Any:
    return rng.integers(-128, 128, size=(rows, k), dtype=cp.int32).astype(cp.int8)


def prepare_lowp(
    cp: Any, point: Point, rng: Any, scaling: str = "tensor", chain: int = SCALE_BLOCK,
    boxes: tuple[int, int] | None = None, c_box_rows: int = 0,
) -> Prepared:  # fmt: skip
    """Inputs, output, reference and baseline for one point. ``scaling``: the
    FP8 scale mode; ``chain``: K the kernel sums in the tensor core between
    adds into FP32 (0: all of K), for the tolerance; ``boxes``: rows of the TMA
    boxes of A and B, for the rungs that take tensor maps; ``c_box_rows``: the
    rows of C's boxes, for the rungs that store C by TMA (0: C is a pointer)."""
    if point.dtype == INT8:
        return _prepare_int8(cp, point, rng, boxes)
    return _prepare_fp8(cp, point, rng, scaling, chain or point.shape.k, boxes, c_box_rows)


def _operands(a: Any, b: Any, boxes: tuple[int, int] | None) -> tuple[Any, ...]:
    return (a.data.ptr, b.data.ptr) if boxes is None else _tensor_maps(a, b, boxes)


def _prepare_int8(cp: Any, point: Point, rng: Any, boxes: tuple[int, int] | None) -> Prepared:
    s = point.shape
    a, b = _int8_inputs(cp, rng, s.m, s.k), _int8_inputs(cp, rng, s.n, s.k)
    guard = guarded_empty(cp, (s.m, s.n), cp.int32)
    c = guard.inner
    ref = cp.empty((s.m, s.n), dtype=cp.int64)
    sketch = Sketch(exact=True)

    def reference() -> None:
        # float64 products and sums are exact here (every sum is under 2^31), so DGEMM gives the int64 answer.
        ref[...] = cp.matmul(a.astype(cp.float64), b.astype(cp.float64).T).astype(cp.int64)

    def renew() -> None:
        new_a, new_b = _int8_inputs(cp, rng, s.m, s.k), _int8_inputs(cp, rng, s.n, s.k)
        gemm_sketch(cp, rng, sketch, new_a.astype(cp.float64), new_b.astype(cp.float64), b_transposed=True)
        a[...], b[...] = new_a, new_b  # last: warm in L2

    def redraw() -> None:
        renew()
        reference()

    def error() -> float:
        # Exact or not: any difference at all is an error (relative_error of a wrong int32 C is never 0).
        return 0.0 if bool(cp.array_equal(c.astype(cp.int64), ref)) else max(relative_error(cp, c, ref), 1e-300)

    reference()
    operands = _operands(a, b, boxes)
    lib, name = baseline_for(cp, point, "tensor", a, b, None)
    return Prepared(
        args=(*operands, c.data.ptr, np.int32(s.m), np.int32(s.n), np.int32(s.k)),
        poison=lambda: poison(cp, c),
        error=error,
        baseline=lib,
        baseline_name=name,
        buffers=(a, b, c, ref, *operands),
        guards=(guard,),
        redraw=redraw,
        explain=lambda: poison_left(cp, c),
        tolerance=0.0,
        renew=renew,
        sample_error=lambda: sketch.error(cp, c),
        reference=reference,
        stack=Stackable(
            a=Operand(a, drawn(_int8_inputs, s.m, s.k), lambda xp, stored: stored.astype(xp.float64)),
            b=Operand(b, drawn(_int8_inputs, s.n, s.k), lambda xp, stored: stored.astype(xp.float64)),
            out=c,
            out_values=lambda xp, stored: stored,
            poison=lambda xp, stored: poison(xp, stored),
            b_transposed=True,
            exact=True,
        ),
    )


def _c_argument(c: Any, c_box_rows: int, bf16_c: bool) -> Any:
    """C as the kernel takes it: a pointer, or a TMA tensor map of boxes of c_box_rows rows x 128 bytes."""
    if not c_box_rows:
        return c.data.ptr
    from gemmlab.problems.tensor import _tensor_map

    return _tensor_map(c, c_box_rows, bf16_c)


def _prepare_fp8(
    cp: Any, point: Point, rng: Any, scaling: str, chain: int, boxes: tuple[int, int] | None, c_box_rows: int = 0
) -> Prepared:
    s = point.shape
    fmt_a, fmt_b = (FORMATS[f] for f in fp8_inputs(point.dtype))
    bf16_c = point.dtype in BF16_C
    c_type = "bfloat16" if bf16_c else "float32"
    qa = quantise(cp, draw(cp, rng, s.m, s.k), fmt_a, scaling, 1)
    qb = quantise(cp, draw(cp, rng, s.n, s.k), fmt_b, scaling, SCALE_BLOCK)
    a, b, sa, sb = qa.codes, qb.codes, qa.scales, qb.scales
    guard = guarded_empty(cp, (s.m, s.n), cp.uint16 if bf16_c else cp.float32)
    c = guard.inner
    ref = cp.empty((s.m, s.n), dtype=cp.float64)
    exact = [qa.exact, qb.exact]
    sketch = Sketch()

    def reference() -> None:
        cp.matmul(exact[0], exact[1].T, out=ref)

    def redraw() -> None:
        # In place: the kernel (and any tensor map) holds the addresses of the codes and scales.
        new_a = quantise(cp, draw(cp, rng, s.m, s.k), fmt_a, scaling, 1)
        new_b = quantise(cp, draw(cp, rng, s.n, s.k), fmt_b, scaling, SCALE_BLOCK)
        a[...], sa[...], b[...], sb[...] = new_a.codes, new_a.scales, new_b.codes, new_b.scales
        exact[:] = [new_a.exact, new_b.exact]
        reference()
        gemm_sketch(cp, rng, sketch, exact[0], exact[1], b_transposed=True)

    def renew() -> None:
        # Quantising a fresh draw costs tens of array passes over float64 data
        # (15 ms a sample at 4096 on an H200, against 0.1 ms for the kernel);
        # instead each operand's rows are shuffled, within the rows that share
        # a scale, their scales with them, and a random half of them negated
        # (the sign bit of the code): every element moves or changes, the
        # values stay those of a quantised draw, and the exact values follow.
        (exact[0], write_a), (exact[1], write_b) = (
            _reshuffled(cp, rng, a, sa, exact[0], scaling, 1),
            _reshuffled(cp, rng, b, sb, exact[1], scaling, SCALE_BLOCK),
        )
        gemm_sketch(cp, rng, sketch, exact[0], exact[1], b_transposed=True)
        write_a(), write_b()  # last: the codes warm in L2

    reference()
    operands = _operands(a, b, boxes)
    c_arg = _c_argument(c, c_box_rows, bf16_c)
    lib, name = baseline_for(cp, point, scaling, a, b, (sa, sb))
    return Prepared(
        args=(*operands, c_arg, sa.data.ptr, sb.data.ptr, np.int32(s.m), np.int32(s.n), np.int32(s.k)),
        poison=lambda: poison(cp, c, c_type),
        error=lambda: relative_error(cp, values(cp, c, c_type), ref),
        baseline=lib,
        baseline_name=name,
        buffers=(a, b, c, sa, sb, ref, *operands, c_arg),
        guards=(guard,),
        redraw=redraw,
        explain=lambda: poison_left(cp, values(cp, c, c_type)),
        tolerance=fp8_tolerance(chain, bf16_c),
        renew=renew,
        sample_error=lambda: sketch.error(cp, values(cp, c, c_type)),
        reference=reference,
        # For the peer rungs (kernels/peers), which take arrays: the codes as uint8, C as stored.
        arrays={"A": a, "B": b, "C": c, "scale_a": sa, "scale_b": sb},
    )


def _reshuffled(
    xp: Any, rng: Any, codes: Any, scales: Any, exact: Any, scaling: str, rows_per_group: int
) -> tuple[Any, Callable[[], None]]:
    """``codes`` (rows x K) renewed by a shuffle of its rows within their
    scale groups and a negation of a random half of them, ``scales`` moved
    with their rows where each row has its own: the new exact values, and
    what writes the codes and scales in place (called last, so that they are
    warm in L2 when the launch reads them)."""
    rows = codes.shape[0]
    group = xp.arange(rows) // rows_per_group if scaling == "block" else xp.zeros(rows)
    order = xp.argsort(group * 2.0 + rng.random(size=rows, dtype=xp.float64))
    flip = rng.random(size=rows, dtype=xp.float64) < 0.5
    new_codes = codes[order] ^ (flip[:, None] * 0x80).astype(xp.uint8)

    def write() -> None:
        if scaling == "rowcol":
            scales[...] = scales[order]
        elif scaling == "block" and rows_per_group == 1:
            scales[...] = scales[:, order]  # stored (K groups, rows)
        codes[...] = new_codes

    return exact[order] * xp.where(flip, -1.0, 1.0)[:, None], write


def lowp_device_bytes(point: Point) -> int:
    """Peak device memory of prepare_lowp: while an operand is quantised, its
    float data and up to a dozen float64 temporaries of its size (encode's
    nearest-code search); then the codes and the float64 values of A and B,
    the reference and C."""
    s = point.shape
    larger = max(s.m, s.n) * s.k
    inputs = s.m * s.k + s.n * s.k
    return larger * 12 * 8 + inputs * (8 + 1) + s.m * s.n * (8 + 4) + guard_bytes(s.n * 4)


def lowp_problem(
    scaling: str = "tensor", chain: int = SCALE_BLOCK, boxes: tuple[int, int] | None = None, c_box_rows: int = 0
) -> Problem:
    """The problem of a rung that reads scales this way and sums ``chain`` K
    in its tensor cores between adds into FP32 (0: all of K); ``c_box_rows``:
    C is a TMA tensor map with boxes of these rows."""

    def prepare(cp: Any, point: Point, rng: Any) -> Prepared:
        return prepare_lowp(cp, point, rng, scaling, chain, boxes, c_box_rows)

    def operands(cp: Any, point: Point, gemm: GemmOperands) -> tuple:
        return lowp_operands(point, gemm, boxes, c_box_rows)

    # A caller's arrays (gemmlab.matmul) come with one scale per tensor, or none (int8); and a
    # caller gets only configurations that promote their sums into FP32 (chain > 0): without, a
    # sum keeps about 14 bits (fp8_tolerance), less than cuBLASLt's default gives.
    takes_callers = scaling == "tensor" and chain != 0
    return Problem("lowp", prepare, lowp_device_bytes, operands=operands if takes_callers else None)


def lowp_operands(point: Point, gemm: GemmOperands, boxes: tuple[int, int] | None, c_box_rows: int) -> tuple:
    """The 8-bit rungs' arguments on a caller's arrays: A (M x K) and B (N x K)
    codes, pointers or TMA tensor maps; C, a pointer or a tensor map; for FP8,
    the per-tensor scales of A and B (``gemm.scale_a``, ``gemm.scale_b``);
    then M, N and K. No alpha, beta or input C."""
    s = point.shape
    operands = _operands(gemm.a, gemm.b, boxes)
    dims = (np.int32(s.m), np.int32(s.n), np.int32(s.k))
    if point.dtype == INT8:
        return (*operands, gemm.c_out.data.ptr, *dims)
    c_arg = _c_argument(gemm.c_out, c_box_rows, point.dtype in BF16_C)
    return (*operands, c_arg, gemm.scale_a.data.ptr, gemm.scale_b.data.ptr, *dims)
