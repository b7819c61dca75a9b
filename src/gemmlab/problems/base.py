"""What "running a kernel" means for each kind of problem: the inputs it
needs, the arguments it takes, the reference it is checked against and the
library routine it is compared with. The runner knows none of these details.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gemmlab.kernels.spec import Point

# int32 inputs are drawn from [-INT_RANGE, INT_RANGE] so that every dot product
# (at most K * INT_RANGE^2 = 16384 * 10^4 < 2^31) fits in int32 and is exact in
# the float64 reference; wrap-around never happens, so the check is exact.
INT_RANGE = 100


@dataclass
class Prepared:
    """Device buffers for one point, ready to launch and check.

    The runner (gemmlab.measure.run) checks every GPU kernel the same way:
    ``poison`` before each checked launch, ``guards`` after it, ``error``
    against ``tolerance``; after the timed launches ``redraw`` writes a second
    input set into the same buffers, so the last check is of an answer the
    kernel cannot have computed before. ``explain`` is asked only about a
    result already found wrong, so what it costs (a NaN count, a product of
    rounded inputs) never touches a passing run.
    """

    args: tuple
    poison: Callable[[], None]  # or, for an output that is also an input (beta * C), its refill
    error: Callable[[], float]
    baseline: Callable[[], None] | None  # the library routine for the same work
    baseline_name: str | None
    # Every device array the kernel reads or writes. The launch arguments are raw
    # pointers, so without these references CuPy's pool could hand the memory to
    # the next temporary while the kernel still uses it.
    buffers: tuple[Any, ...]
    # The same arguments by name, for a kernel that declares its own order and
    # subset of them (a user's kernel: ``KernelSpec.arguments``). Empty for a
    # problem whose kernels all take ``args`` as they are.
    named: dict[str, Any] = field(default_factory=dict)
    # The device arrays themselves by name (A, B, C as CuPy arrays), for a kernel
    # that takes arrays rather than pointers: a user's Python function
    # (gemmlab.backends.python). C is the very array the error is measured on.
    arrays: dict[str, Any] = field(default_factory=dict)
    guards: tuple[Guarded, ...] = ()  # the outputs, each between canary bands
    redraw: Callable[[], None] | None = None  # new random inputs in place, and the reference recomputed
    explain: Callable[[], str | None] | None = None  # what a wrong result looks like, when it says something
    tolerance: float | None = None  # None: the dtype's (core.dtypes.TOLERANCE)
    # Every timed launch is checked (gemmlab.measure.pool): before it, ``renew``
    # writes new random inputs in place and makes what ``sample_error`` checks
    # the next output against, at a cost of the order of the inputs' size (a
    # Sketch), not of the product; the full reference is then out of date
    # until ``reference`` recomputes it for the inputs as they are (asked for
    # only to explain a launch already found wrong). A problem without them
    # renews by ``redraw`` and checks with ``error``.
    renew: Callable[[], None] | None = None
    sample_error: Callable[[], float] | None = None
    reference: Callable[[], None] | None = None
    # The same, for many sets at once (gemmlab.measure.stack): what a GEMM's
    # inputs and output are, so that a batch of short launches, each on a set
    # of its own, is renewed and checked in a few array operations over all
    # of them rather than a few per set. None: the sets are renewed one by one.
    stack: Stackable | None = None


# Guard bands. Each output is allocated with a band on either side, filled with
# CANARY bytes, and the kernel gets a pointer to the inside. A band is at least
# GUARD_BYTES and at least one row of the output (up to MAX_GUARD_BYTES, a row
# of 16384 floats), so a kernel whose bounds test lets one row too many (or one
# row before the first) through writes wholly into a band; it is a multiple of
# ALIGN bytes, so the inside starts where the allocation would have (CuPy's
# blocks are 512-byte aligned; TMA needs 16 bytes, cp.async and vector stores
# 16, the catalogue's widest loads 128), and a write
# anywhere in a band is caught and named without the sanitizer. A write further
# away lands in another allocation or faults: that is the sanitizer's to name.
GUARD_BYTES = 4096
MAX_GUARD_BYTES = 65536
# Set to "0" by `gemmlab check` for its child: under compute-sanitizer C is
# allocated alone, so that memcheck sees its true edges (a write or read into
# a band would be inside the allocation, and memcheck silent about it).
NO_BANDS_VARIABLE = "GEMMLAB_GUARD_BANDS"
ALIGN = 256
# 0xA5A5... is no value a kernel computes by accident: as float32 -4.7e-16 (a
# wrong index would read a real value), as int32 -1515870811, as a bfloat16 and
# a float16 a tiny negative number.
CANARY = 0xA5


@dataclass(frozen=True)
class Guarded:
    """One output inside its canary bands: ``inner`` is what the kernel gets."""

    name: str
    whole: Any  # the allocation: band, output, band
    inner: Any
    band: int  # elements in each band
    row: int  # elements in one row of the output, to say which row a stray write hit

    def damage(self, xp: Any) -> str | None:
        """None while both bands hold the canary; otherwise what was written where."""
        if self.band == 0:
            return None
        words = self.whole.view(_UNSIGNED[self.whole.itemsize])
        return band_damage(xp, words[: self.band], words[-self.band :], self.name, self.row)


_UNSIGNED = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def band_elements(row_bytes: int, itemsize: int) -> int:
    """Elements in one guard band of an output whose rows are ``row_bytes`` long."""
    if os.environ.get(NO_BANDS_VARIABLE) == "0":
        return 0
    band = min(max(GUARD_BYTES, row_bytes), MAX_GUARD_BYTES)
    return -(-band // ALIGN) * ALIGN // itemsize


def guarded_empty(cp: Any, shape: tuple[int, ...], dtype: Any, name: str = "C") -> Guarded:
    """An uninitialised output of ``shape`` between two canary bands."""
    dtype = cp.dtype(dtype)
    size = 1
    for extent in shape:
        size *= extent
    band = band_elements(shape[-1] * dtype.itemsize, dtype.itemsize)
    whole = cp.empty(2 * band + size, dtype=dtype)
    if band:
        raw = whole.view(cp.uint8)
        raw[: band * dtype.itemsize] = CANARY
        raw[-band * dtype.itemsize :] = CANARY
    row = shape[-1] if len(shape) > 1 and shape[0] > 1 else 0  # a vector has no rows to name
    return Guarded(name, whole, whole[band : band + size].reshape(shape), band, row)


def guard_bytes(row_bytes: int) -> int:
    """Device bytes the two bands of one output add."""
    return 2 * band_elements(row_bytes, 1)


def band_damage(xp: Any, before: Any, after: Any, name: str = "C", row: int = 0) -> str | None:
    """What was written into the bands before and after an output, as
    unsigned words of its element's width, or None if nothing was. Offsets
    are in elements: -1 is the element just before the first, +0 the one just
    after the last."""
    canary = int.from_bytes(bytes([CANARY]) * before.itemsize, "little")
    hit_before = xp.flatnonzero(before != canary)
    hit_after = xp.flatnonzero(after != canary)
    count = int(hit_before.size) + int(hit_after.size)
    if count == 0:
        return None
    places = []
    if hit_before.size:
        nearest = int(hit_before[-1]) - int(before.size)
        places.append(f"{int(hit_before.size)} before its start, the nearest at offset {nearest}")
    if hit_after.size:
        first = int(hit_after[0])
        where = f" (row {first // row} past the last row, column {first % row})" if row else ""
        places.append(f"{int(hit_after.size)} after its end, the first at offset +{first}{where}")
    plural = "s" if count > 1 else ""
    return f"wrote {count} element{plural} outside {name}: {'; '.join(places)}"


# -- every timed launch checked: the sketch ----------------------------------------

# Columns of the random probe matrix X a timed launch's C is checked through.
# E|M X|_F^2 = SKETCH_PROBES |M|_F^2 for X of independent standard normal
# entries, so |C X - Y| / |Y|, with Y = (A.B) X computed in float64 from the
# inputs, estimates the same relative Frobenius error the full reference
# gives; for an error spread over many elements (rounding, lower precision)
# the estimate is within a few per cent, and an unwritten element (NaN) or a
# stale answer is seen whatever X is. 16 columns: a float32 kernel's error at
# K = 16384 (about 3e-6) stays far under its 1e-5 tolerance once the
# estimate's spread is added, and C X costs 32 M N flops, a small share of
# the product's 2 M N K for any K worth timing.
SKETCH_PROBES = 16


@dataclass
class Sketch:
    """What a timed launch's output is checked against: ``probes`` (X, N x
    SKETCH_PROBES) and ``expected`` (Y = (alpha A.B + beta C0) X, M x
    SKETCH_PROBES), both float64, drawn afresh with each input set. ``exact``:
    integer data, where X holds -1, 0 and 1, every sum is exact in float64,
    and any difference is an error."""

    exact: bool = False
    probes: Any = None
    expected: Any = None
    floor: float = 0.0  # |Y|'s floor under a C that cancels (sqrt(SKETCH_PROBES) x sum_magnitude)

    def draw(self, xp: Any, rng: Any, n: int) -> Any:
        """New probes for an output of ``n`` columns (kept, and returned)."""
        if self.exact:
            self.probes = rng.integers(-1, 2, size=(n, SKETCH_PROBES), dtype=xp.int32).astype(xp.float64)
        else:
            self.probes = rng.standard_normal(size=(n, SKETCH_PROBES), dtype=xp.float64)
        return self.probes

    def error(self, xp: Any, out: Any) -> float:
        """The relative error of ``out`` (its float64 values) seen through the probes."""
        seen = out.astype(xp.float64) @ self.probes
        if self.exact:
            same = bool(xp.array_equal(seen, self.expected))
            return 0.0 if same else max(relative_error(xp, seen, self.expected), 1e-300)
        return relative_error(xp, seen, self.expected, self.floor)


def gemm_sketch(
    xp: Any, rng: Any, sketch: Sketch, a64: Any, b64: Any, *, b_transposed: bool = False, alpha: float = 1.0,
    addend: Any = None, magnitude: float = 0.0,
) -> None:  # fmt: skip
    """``sketch`` made for C = alpha A.B + addend (``b_transposed``: B is
    stored N x K and C = A.B^T), from the float64 values of the inputs: new
    probes, then Y = alpha A (B X) + addend X, two products of the order of
    the inputs' size."""
    n = b64.shape[0] if b_transposed else b64.shape[1]
    x = sketch.draw(xp, rng, n)
    bx = b64.T @ x if b_transposed else b64 @ x
    y = a64 @ bx
    if alpha != 1.0:
        y *= alpha
    if addend is not None:
        y += addend @ x
    sketch.expected = y
    sketch.floor = magnitude * SKETCH_PROBES**0.5


@dataclass(frozen=True)
class Operand:
    """One input of a GEMM as a stack of sets sees it: the set's own buffer,
    how to draw values for ``count`` sets at once (in the buffer's storage
    type, shape (count, *buffer.shape)), and their exact float64 values."""

    array: Any
    draw: Callable[[Any, Any, int], Any]  # (xp, rng, count) -> stored values, (count, rows, cols)
    exact: Callable[[Any, Any], Any]  # (xp, stored) -> float64 values


@dataclass(frozen=True)
class Stackable:
    """A GEMM set, C = alpha A.B + beta C0 (``b_transposed``: B stored N x K,
    C = A.B^T), for gemmlab.measure.stack. ``primed``: C is also the input C0,
    so it starts as C0 rather than poisoned; ``exact``: integer data."""

    a: Operand
    b: Operand
    out: Any  # C as the kernel writes it
    out_values: Callable[[Any, Any], Any]  # (xp, stored C) -> its values
    poison: Callable[[Any, Any], None]  # (xp, stored Cs) fills them with the poison
    c0: Operand | None = None
    alpha: float = 1.0
    beta: float = 0.0
    b_transposed: bool = False
    primed: bool = False
    exact: bool = False


def drawn(draw: Callable[[Any, Any, int, int], Any], rows: int, cols: int) -> Callable[[Any, Any, int], Any]:
    """A stack draw from a problem's own ``draw(xp, rng, rows, cols)``: one
    call for all sets, the rows of every set one after the other."""
    return lambda xp, rng, count: draw(xp, rng, count * rows, cols).reshape(count, rows, cols)


def redraw_matrix(cp: Any, rng: Any, array: Any, dtype: str) -> None:
    """New random values into ``array`` in place (the kernel keeps its pointer)."""
    array[...] = random_matrix(cp, rng, *array.shape, dtype)


def random_matrix(cp: Any, rng: Any, rows: int, cols: int, dtype: str) -> Any:
    """Random inputs as the kernel reads them: bfloat16 as its bit patterns
    (uint16; CuPy has no bfloat16), the others in their own type."""
    if dtype == "int32":
        return rng.integers(-INT_RANGE, INT_RANGE + 1, size=(rows, cols), dtype=cp.int32)
    if dtype == "bfloat16":
        return bf16_bits(cp, rng.uniform(-1.0, 1.0, size=(rows, cols)).astype(cp.float32))
    return rng.uniform(-1.0, 1.0, size=(rows, cols)).astype(dtype)


def storage(xp: Any, dtype: str) -> Any:
    """The array type an element of ``dtype`` is stored in."""
    return xp.uint16 if dtype == "bfloat16" else xp.dtype(dtype)


def values(xp: Any, array: Any, dtype: str) -> Any:
    """The numbers a stored array holds (bfloat16 bit patterns read as float32)."""
    return bf16_value(xp, array) if dtype == "bfloat16" else array


def relative_error(cp: Any, out: Any, ref: Any, magnitude: float = 0.0) -> float:
    """Frobenius-norm relative error in float64; NaN anywhere gives NaN.
    ``magnitude`` (see ``sum_magnitude``), when given, is a floor under the
    reference's norm: a C of a few elements can cancel to almost nothing, and
    its error, relative to that small number, would then say nothing about
    the arithmetic."""
    diff = out.astype(cp.float64) - ref
    ref_norm = max(float(cp.linalg.norm(ref)), magnitude)
    err = float(cp.linalg.norm(diff))
    return err / ref_norm if ref_norm else err


def sum_magnitude(cp: Any, a: Any, b: Any, alpha: float = 1.0, c0: Any = None, beta: float = 0.0) -> float:
    """The Frobenius norm that alpha * A.B + beta * C0 (A M x K, B K x N, as
    float64 or exact in it) has when its terms' signs do not conspire: each
    element a sum of independent zero-mean terms has an expected square equal
    to the sum of its terms' squares, here
    alpha^2 sum_l |A[:, l]|^2 |B[l, :]|^2 + beta^2 |C0|^2 over the whole C.
    For the suite's uniform(-1, 1) inputs it is about the reference's own
    norm on a large C, and well above it where a small C happens to cancel;
    it needs no second product (O(MK + KN))."""
    a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
    squares = alpha * alpha * float(cp.dot(cp.sum(a64 * a64, axis=0), cp.sum(b64 * b64, axis=1)))
    if c0 is not None and beta:
        c64 = c0.astype(cp.float64)
        squares += beta * beta * float(cp.sum(c64 * c64))
    return squares**0.5


def uniform_magnitude(m: int, n: int, k: int, alpha: float = 1.0, beta: float = 0.0) -> float:
    """What :func:`sum_magnitude` is on average for inputs uniform in [-1, 1]
    (each square 1/3 on average): the floor a renewed set's sketch uses,
    known without a pass over the inputs."""
    return (alpha * alpha * m * n * k / 9 + beta * beta * m * n / 3) ** 0.5


# A bfloat16 NaN (all exponent bits, a non-zero mantissa): what a bfloat16 C is
# poisoned with, as a float C is with NaN.
BF16_NAN = 0xFFFF


def poison(cp: Any, out: Any, dtype: str | None = None) -> None:
    """Fill the output with a value no correct kernel writes. ``dtype``: the
    element type when the array's own does not say it (bfloat16 in uint16)."""
    if dtype == "bfloat16":
        out.fill(BF16_NAN)
    elif out.dtype.kind == "f":
        out.fill(cp.nan)
    else:
        out.fill(poison_value(cp, out.dtype))


def poison_value(xp: Any, dtype: Any) -> int:
    """The poison of an integer output: its most negative value."""
    return int(xp.iinfo(dtype).min)


def poison_left(xp: Any, out: Any, name: str = "C") -> str | None:
    """When ``out`` still holds poison, or NaN computed from it: how much, and
    what that means. Float outputs are poisoned with NaN, and NaN spreads
    through arithmetic, so NaN also marks a kernel that read its output before
    writing it (``C[i] += ...`` without setting C first)."""
    if out.dtype.kind == "f":
        bad = int(xp.count_nonzero(xp.isnan(out)))
        what = "NaN"
    elif out.dtype.kind in "iu":
        bad = int(xp.count_nonzero(out == poison_value(xp, out.dtype)))
        what = "the poison value"
    else:
        return None
    if bad == 0:
        return None
    return (
        f"{bad} of {out.size} elements of {name} are {what}: {name} was filled with {what} before the launch, so "
        f"the kernel left them unwritten, or read {name} before writing it (e.g. `{name}[i] += ...` without "
        f"setting {name}[i] first)"
    )


def bf16_bits(xp: Any, x: Any) -> Any:
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even."""
    bits = x.view(xp.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(xp.uint16)


def bf16_value(xp: Any, bits: Any) -> Any:
    """bfloat16 bit patterns (uint16) -> their exact float32 values."""
    return (bits.astype(xp.uint32) << 16).view(xp.float32)


def rounded(xp: Any, x: Any, dtype: str) -> Any:
    """``x`` (float32) rounded to ``dtype`` and back: the values a kernel sees
    after converting its inputs to that type."""
    if dtype == "bfloat16":
        return bf16_value(xp, bf16_bits(xp, x))
    return x.astype(dtype).astype(xp.float32)


# The precision judgment, for a float32 kernel whose error is over float32's
# tolerance. Rounding the inputs to float16 (unit roundoff 2^-11) gives a
# relative error near 3e-4 on gemmlab's inputs (uniform in [-1, 1]), bfloat16
# (2^-8) near 2e-3, TF32 like float16; accumulating in those types adds about
# 0.4 * u * sqrt(K). float32 arithmetic in any order stays near
# 0.4 * 2^-24 * sqrt(K), 3e-6 at K = 16384, under the 1e-5 tolerance. Such an
# error also sits on almost every element, where a bug (a wrong index, a
# missed tile, a race) puts errors of the order of the values themselves on
# some elements. So a wrong float32 result is called lower precision when
# (1) its relative error is under LOW_PRECISION_CEILING, far below the order-1
# error of a bug, (2) over WIDESPREAD of C's elements are off by more than the
# float32 tolerance (relative to C's RMS value), and (3) its error looks like
# a 16-bit type's: either it points the same way as the error of the product
# of the inputs rounded to that type (correlation at least SAME_WAY: a kernel
# that converts its inputs with round-to-nearest makes the same rounding
# errors), or its size lies between a quarter of the mildest type's and
# SIZE_ROOM times the coarsest's (a kernel that also sums in 16 bits). (3)
# keeps a float32 kernel just over its tolerance, and a systematic error such
# as a forgotten beta*C (about 10%), from being called lower precision. The
# rounded-input products are computed only for a result already wrong.
LOW_PRECISION_CEILING = 0.1
WIDESPREAD = 0.5
SAME_WAY = 0.3
SIZE_ROOM = 4


def off_fraction(xp: Any, out: Any, ref: Any, tolerance: float) -> float:
    """The share of elements off by more than ``tolerance`` times the RMS of ``ref``."""
    scale = float(xp.sqrt(xp.mean(ref * ref))) or 1.0
    return float(xp.count_nonzero(xp.abs(out.astype(xp.float64) - ref) > tolerance * scale)) / out.size


def correlation(xp: Any, x: Any, y: Any) -> float:
    """cos of the angle between two error arrays (0 when either is zero)."""
    norms = float(xp.linalg.norm(x)) * float(xp.linalg.norm(y))
    return float(xp.vdot(x.ravel(), y.ravel())) / norms if norms else 0.0


def lower_precision(
    xp: Any, out: Any, ref: Any, tolerance: float, rounded_products: Callable[[], Mapping[str, Any]]
) -> str | None:
    """Why a float32 result over ``tolerance`` looks computed in a 16-bit
    type, or None when it does not (see the reasoning above).
    ``rounded_products``: for each 16-bit type, the result computed from the
    inputs rounded to it, asked for only when (1) and (2) hold."""
    error = relative_error(xp, out, ref)
    if not tolerance < error < LOW_PRECISION_CEILING:  # NaN fails too: that is poison's to explain
        return None
    share = off_fraction(xp, out, ref, tolerance)
    if share < WIDESPREAD:
        return None
    diff = out.astype(xp.float64) - ref
    errors, same_way = {}, {}
    for name, product in rounded_products().items():
        their = product.astype(xp.float64) - ref
        errors[name] = relative_error(xp, product, ref)
        same_way[name] = correlation(xp, diff, their)
    pointed = max(same_way, key=same_way.__getitem__)
    if same_way[pointed] >= SAME_WAY:
        nearest = pointed
    elif min(errors.values()) / 4 <= error <= SIZE_ROOM * max(errors.values()):
        nearest = min(errors, key=lambda name: abs(math.log(error / errors[name])))
    else:
        return None
    seen = ", ".join(f"to {name} {value:.2g}" for name, value in errors.items())
    return (
        "the kernel computes at lower precision than float32: "
        f"relative error {error:.2g} on {share:.0%} of the elements, where float32 arithmetic stays "
        f"under {tolerance:.2g}; inputs rounded {seen}: it looks like {nearest} arithmetic"
    )


def _i32(value: int) -> Any:
    import numpy as np

    return np.int32(value)


@dataclass(frozen=True)
class Problem:
    """A kind of work: how to set it up on the device and how it is measured.

    ``metric`` names the headline figure: "gflops" for compute kernels, "gbs"
    (GB/s of bytes read + written) for memory-bound ones. ``operands``: for a
    GEMM, the launch arguments for a caller's own arrays (``gemmlab.matmul``),
    ``operands(cp, point, gemm)`` with ``gemm`` a :class:`GemmOperands`; None
    for a problem that only ever runs on its own inputs.
    """

    name: str
    prepare: Callable[[Any, Point, Any], Prepared]
    device_bytes: Callable[[Point], int]
    metric: str = "gflops"
    operands: Callable[[Any, Point, GemmOperands], tuple] | None = None


@dataclass(frozen=True)
class GemmOperands:
    """A caller's arrays for C_out = alpha A.B + beta C_in, laid out as the
    problem's kernels read them (device arrays; C_in may be C_out itself where
    the kernel has no separate input C)."""

    a: Any
    b: Any
    c_in: Any
    c_out: Any
    alpha: float = 1.0
    beta: float = 0.0
    # FP8: each operand's per-tensor scale, a float32 device array of one
    # element (A's values are its codes times scale_a, B's times scale_b).
    scale_a: Any = None
    scale_b: Any = None
