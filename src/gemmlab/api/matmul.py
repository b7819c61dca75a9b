"""``gemmlab.matmul``: a matrix product on CuPy arrays or PyTorch tensors by
the kernel the dispatcher picked for this shape and GPU
(:mod:`gemmlab.studies.dispatch`). Tensors are taken through DLPack, bfloat16
ones natively, and the result comes back as a tensor (:mod:`gemmlab.api.arrays`).

What it takes (docs/dispatch.md):

- float32: ``a`` (M x K) and ``b`` (K x N), C-contiguous; returns
  ``alpha * a @ b + beta * c`` (``c`` M x N float32, or None: ``beta`` must then
  be 0), in a new float32 array. ``c`` is read, never written.
- bfloat16: CuPy has no bfloat16 type, so bfloat16 matrices are uint16 arrays
  of bfloat16 bit patterns (as gemmlab stores them). The tensor-core kernels
  compute A . B^T with B stored N x K: pass ``b`` as the transpose view of an
  N x K C-contiguous array (``bt.T``) and no copy is made; a C-contiguous K x N
  ``b`` is transposed into a copy first. C is float32 (``out_dtype`` None or
  "float32"), or bfloat16 bits (``out_dtype="bfloat16"``). The kernels take no
  alpha, beta or input C: with a float32 C those are applied after the product
  (one more pass over C); with a bfloat16 C they are refused.

The picks are those tuned into the database for this GPU, with the tables
gemmlab ships (:mod:`gemmlab.studies.shipped`) for the shapes they leave; a
shape with no pick of its own gets the cost model's fastest candidate,
corrected by them (:mod:`gemmlab.studies.costmodel`). Picks are read once
per process and database (:func:`clear_cache` forgets them, e.g. after
tuning again), and each kernel is compiled, loaded and planned
once per shape (:mod:`gemmlab.measure.gemm`), so a call costs checking the
arrays, building the launch arguments (for the TMA rungs, a tensor map per
matrix) and the launch.

:class:`Matmul` is the same product on arrays that stay where they are: checked,
dispatched and bound once, so that each run costs the launch alone. Loops that
multiply the same buffers again and again (a solver's iterations, the
distributed ladder's local GEMMs) use it.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemmlab.api.arrays import caller_stream, is_torch, to_cupy, to_torch
from gemmlab.api.fp8 import matmul_fp8, wants_fp8
from gemmlab.core import gpu
from gemmlab.core.errors import GemmlabError, StoreError
from gemmlab.core.shapes import Shape
from gemmlab.kernels.spec import KernelSpec
from gemmlab.problems.base import GemmOperands
from gemmlab.store.store import DEFAULT_PATH, Store
from gemmlab.studies.costmodel import Calibration, GPUModel
from gemmlab.studies.dispatch import TUNED, Choice, choose
from gemmlab.studies.dispatch_tuning import Known, known_on

if TYPE_CHECKING:
    from gemmlab.core.gpu import DeviceInfo

# Where matmul reads the dispatcher's picks when no ``db`` is given.
DB_VARIABLE = "GEMMLAB_DB"
# Set to 1 to leave the tables gemmlab ships out (the model and the database's picks alone).
NO_SHIPPED_VARIABLE = "GEMMLAB_NO_SHIPPED_TABLES"
# Set to 1 to autotune every shape with no pick of its own on its first call (autotune=True).
AUTOTUNE_VARIABLE = "GEMMLAB_AUTOTUNE"

_KNOWN: dict[tuple[str, str], Known] = {}  # (database, GPU name) -> its picks and timings
_CHOSEN: dict[tuple[str, str, Shape, str], tuple[Choice, KernelSpec]] = {}
_CALIBRATIONS: dict[tuple[str, str], Calibration] = {}


def matmul(
    a: Any, b: Any, c: Any = None, *, alpha: float = 1.0, beta: float = 0.0, out_dtype: str | None = None,
    db: str | Path | None = None, autotune: bool | None = None, scale_a: Any = None, scale_b: Any = None,
    fp8: str | None = None,
) -> Any:  # fmt: skip
    """``alpha * a @ b + beta * c`` by the dispatcher's kernel for this shape
    and GPU (see the module's docstring for the types and layouts); a new CuPy
    array, or a tensor where the caller gave tensors. ``db``: the results
    database holding the tuned picks (default: $GEMMLAB_DB, else
    gemmlab-results.sqlite here); without one, the shipped table of this GPU
    and the cost model decide. ``autotune`` (default: $GEMMLAB_AUTOTUNE=1): a
    shape with no pick of its own on this GPU has the model's few best
    candidates verified and timed on this first call, and the fastest stored
    in ``db`` for every later one (seconds, once per shape). ``scale_a``,
    ``scale_b``, ``fp8``: the FP8 product (e4m3 with per-tensor scales, as
    torch._scaled_mm takes it; :mod:`gemmlab.api.fp8`)."""
    if wants_fp8(a, b, scale_a, scale_b, fp8):
        return matmul_fp8(a, b, c, alpha=alpha, beta=beta, out_dtype=out_dtype, db=db, autotune=autotune,
                          scale_a=scale_a, scale_b=scale_b, fp8=fp8)  # fmt: skip
    cp = gpu.cupy()  # NoGPUError, with its fix, on a machine without a usable GPU
    tensors = any(is_torch(x) for x in (a, b, c))
    a, b, c = (to_cupy(cp, x, name, "gemmlab.matmul") for x, name in ((a, "a"), (b, "b"), (c, "c")))
    device = one_device(cp, "gemmlab.matmul", a, b, c)
    dtype, shape, b_is_transposed = check_operands(a, b, c, alpha=alpha, beta=beta, out_dtype=out_dtype)
    _choice, spec = dispatch(shape, dtype, db, device, autotune)
    from gemmlab.measure.gemm import launch_gemm

    with cp.cuda.Device(device), caller_stream(cp, device, tensors):
        if dtype == "float32":
            out = cp.empty((shape.m, shape.n), dtype=cp.float32)
            c_in = c if c is not None else cp.zeros_like(out)  # the kernels read C whatever beta is
            launch_gemm(spec, dtype, GemmOperands(a, b, c_in, out, alpha, beta), device)
        else:
            bt = b.T if b_is_transposed else cp.ascontiguousarray(b.T)
            out = cp.empty((shape.m, shape.n), dtype=cp.uint16 if dtype == "bfloat16-out" else cp.float32)
            launch_gemm(spec, dtype, GemmOperands(a, bt, out, out), device)
            if alpha != 1.0:
                out *= cp.float32(alpha)
            if c is not None and beta != 0.0:
                out += cp.float32(beta) * c
    return to_torch(cp, out, dtype == "bfloat16-out") if tensors else out


class Matmul:
    """``a @ b`` on fixed CuPy arrays, checked, dispatched and bound once:
    each :meth:`run` launches the dispatcher's kernel on CuPy's current
    stream and returns :attr:`out`, the one C it writes every time.

    The types and layouts are :func:`matmul`'s, with no alpha, beta or input
    C, and a bfloat16 ``b`` must be the transpose view of an N x K array
    (``bt.T``): the kernels read that array where it is, so a copy made here
    would not see later changes to ``b``. ``out``: an array to write C into
    (M x N, C-contiguous, float32, or uint16 bfloat16 bits for
    ``out_dtype="bfloat16"``); by default one is allocated. ``a``, ``b`` and
    ``out`` must stay alive and in place while the plan is used; new values
    written into them are what the next run multiplies. Every run writes the
    same ``out`` (and, for a rung that takes one, the same workspace), so runs
    on different streams must be ordered by the caller. ``db`` and
    ``autotune``: as for :func:`matmul`."""

    def __init__(
        self, a: Any, b: Any, *, out: Any = None, out_dtype: str | None = None, db: str | Path | None = None,
        autotune: bool | None = None,
    ) -> None:  # fmt: skip
        cp = gpu.cupy()
        self._tensors = any(is_torch(x) for x in (a, b, out))
        a, b, out = (to_cupy(cp, x, name, "gemmlab.Matmul") for x, name in ((a, "a"), (b, "b"), (out, "out")))
        device = one_device(cp, "gemmlab.Matmul", a, b, out)
        dtype, shape, b_is_transposed = check_operands(a, b, out_dtype=out_dtype)
        if dtype != "float32" and not b_is_transposed:
            raise GemmlabError(
                "A bfloat16 b for gemmlab.Matmul must be the transpose view of an N x K C-contiguous array.",
                "Store B as bt (N x K) and pass bt.T; or call gemmlab.matmul, which copies b each call.",
            )
        out_type = cp.uint16 if dtype == "bfloat16-out" else cp.float32
        if out is not None and (tuple(out.shape) != (shape.m, shape.n) or out.dtype != out_type
                                or not out.flags.c_contiguous):  # fmt: skip
            layout = "" if out.flags.c_contiguous else ", not C-contiguous"
            raise GemmlabError(
                f"out must be a C-contiguous {shape.m} x {shape.n} {cp.dtype(out_type).name} array; it is "
                f"{' x '.join(map(str, out.shape))} {out.dtype}{layout}.",
                "Pass cupy.empty((M, N), dtype=...) or leave out out.",
            )
        self.choice, spec = dispatch(shape, dtype, db, device, autotune)
        self.shape, self.dtype = shape, dtype
        from gemmlab.measure.gemm import bind_gemm

        with cp.cuda.Device(device):
            self.out = out if out is not None else cp.empty((shape.m, shape.n), dtype=out_type)
            if dtype == "float32":
                self._c_in = cp.zeros_like(self.out)  # the kernels read C whatever beta is
                operands = GemmOperands(a, b, self._c_in, self.out, 1.0, 0.0)
            else:
                operands = GemmOperands(a, b.T, self.out, self.out)
            self._bound = bind_gemm(spec, dtype, operands, device)
        self._keep = (a, b)  # the arrays the launch arguments point into
        self._cp, self._device = cp, device
        # A caller who gave tensors gets a tensor: the same memory as out, made once.
        self._result = to_torch(cp, self.out, dtype == "bfloat16-out") if self._tensors else self.out

    def run(self) -> Any:
        """Launch the product on CuPy's current stream (PyTorch's, for a caller
        who gave tensors); :attr:`out`, as a tensor for such a caller."""
        with caller_stream(self._cp, self._device, self._tensors):
            self._bound.launch()
        return self._result


def one_device(cp: Any, caller: str, *arrays: Any) -> int:
    """The GPU that all the given arrays (None left out) are on; a GemmlabError
    with the fix when one is not a CuPy array or they are on different GPUs."""
    given = [x for x in arrays if x is not None]
    if not all(isinstance(x, cp.ndarray) for x in given):
        kinds = ", ".join(sorted({type(x).__name__ for x in given if not isinstance(x, cp.ndarray)}))
        raise GemmlabError(f"{caller} takes CuPy arrays and PyTorch tensors on the GPU; got {kinds}.",
                           "Move the matrices to the GPU first: cupy.asarray(a), or torch's a.cuda().")  # fmt: skip
    device = given[0].device.id
    if any(x.device.id != device for x in given):
        raise GemmlabError("The matrices of one matmul are on different GPUs.", "Put them on one device.")
    return device


def check_operands(
    a: Any, b: Any, c: Any = None, *, alpha: float = 1.0, beta: float = 0.0, out_dtype: str | None = None
) -> tuple[str, Shape, bool]:  # fmt: skip
    """The element type matmul runs (float32, bfloat16 or bfloat16-out), the
    shape, and whether ``b`` is the transpose view of an N x K array; a
    GemmlabError with cause and fix for anything matmul cannot take. Reads
    only shapes, dtypes and flags, so NumPy arrays stand in for CuPy ones."""
    kinds = {str(a.dtype), str(b.dtype)}
    if len(kinds) != 1 or kinds - {"float32", "uint16"}:
        raise GemmlabError(
            f"gemmlab.matmul takes float32 matrices, or bfloat16 ones as uint16 bit patterns; got {a.dtype} and "
            f"{b.dtype}.",
            "Convert both to float32 (a.astype(cupy.float32)), or both to bfloat16 bits; for FP8 e4m3 codes "
            '(uint8), pass fp8="e4m3" and the scales (scale_a=, scale_b=).',
        )
    if a.ndim != 2 or b.ndim != 2:
        raise GemmlabError(
            f"gemmlab.matmul multiplies matrices; got arrays of {a.ndim} and {b.ndim} dimensions.",
            "Reshape them to 2-D (M x K and K x N).",
        )
    (m, k), (k_b, n) = a.shape, b.shape
    if k != k_b:
        raise GemmlabError(
            f"a is {m} x {k} and b is {k_b} x {n}: a's columns must equal b's rows.",
            "Give b as K x N (for bfloat16 too: pass the transpose view bt.T of an N x K array).",
        )
    if min(m, n, k) < 1:
        raise GemmlabError(f"The product {m} x {n} x {k} is empty.", "Give matrices with at least one element.")
    if not a.flags.c_contiguous:
        raise GemmlabError("a is not C-contiguous (a strided view or a transpose).",
                           "Pass cupy.ascontiguousarray(a).")  # fmt: skip
    bf16 = kinds == {"uint16"}
    transposed = bf16 and b.T.flags.c_contiguous and not b.flags.c_contiguous
    if not (b.flags.c_contiguous or transposed):
        raise GemmlabError(
            "b is not contiguous" + (" (nor the transpose view of an N x K array)." if bf16 else "."),
            "Pass cupy.ascontiguousarray(b)" + (", or bt.T for an N x K C-contiguous bt." if bf16 else "."),
        )
    dtype = _dtype(bf16, out_dtype)
    _check_c(c, m, n, dtype, alpha, beta)
    return dtype, Shape(m, n, k), transposed


def _dtype(bf16: bool, out_dtype: str | None) -> str:
    wanted = None if out_dtype is None else str(out_dtype).replace("bf16", "bfloat16")
    if not bf16:
        if wanted not in (None, "float32"):
            raise GemmlabError(f"float32 inputs give a float32 C, not {out_dtype}.", "Leave out_dtype out.")
        return "float32"
    if wanted in (None, "float32"):
        return "bfloat16"
    if wanted == "bfloat16":
        return "bfloat16-out"
    raise GemmlabError(f"bfloat16 inputs give a float32 or bfloat16 C, not {out_dtype}.",
                       'Use out_dtype="float32" or out_dtype="bfloat16".')  # fmt: skip


def _check_c(c: Any, m: int, n: int, dtype: str, alpha: float, beta: float) -> None:
    if c is None:
        if beta != 0.0:
            raise GemmlabError(f"beta is {beta} but no c was given.", "Pass c, or leave beta at 0.")
        if dtype == "bfloat16-out" and alpha != 1.0:
            raise GemmlabError("A bfloat16 C takes no alpha.", 'Use out_dtype="float32" and scale the result.')
        return
    if dtype == "bfloat16-out":
        raise GemmlabError("A bfloat16 C takes no input c (the kernels write C alone).",
                           'Use out_dtype="float32", or add c yourself.')  # fmt: skip
    if tuple(c.shape) != (m, n) or str(c.dtype) != "float32":
        raise GemmlabError(f"c must be a {m} x {n} float32 matrix; it is {' x '.join(map(str, c.shape))} {c.dtype}.",
                           "Give c the shape of the product, in float32.")  # fmt: skip
    if not c.flags.c_contiguous:
        raise GemmlabError("c is not C-contiguous.", "Pass cupy.ascontiguousarray(c).")


def dispatch(
    shape: Shape, dtype: str, db: str | Path | None = None, device: int = 0, autotune: bool | None = None
) -> tuple[Choice, KernelSpec]:  # fmt: skip
    """The dispatcher's choice for ``shape`` on GPU ``device`` and its
    catalogue entry, remembered for the process. ``autotune`` (None:
    $GEMMLAB_AUTOTUNE=1): a shape with no pick of its own has the model's few
    best candidates timed now and the fastest stored in the database
    (:mod:`gemmlab.studies.autotune`)."""
    from gemmlab.measure.gemm import device_info

    path = str(_db_path(db))
    info = device_info(device)
    key = (path, info.name, shape, dtype)
    if key not in _CHOSEN:
        choice = _choose(path, info, shape, dtype)
        if choice.reason != TUNED and (autotune if autotune is not None else _env_autotune()):
            _autotune(path, info, shape, dtype, device)
            choice = _choose(path, info, shape, dtype)
        _CHOSEN[key] = (choice, choice.spec)
    return _CHOSEN[key]


def _choose(path: str, info: DeviceInfo, shape: Shape, dtype: str) -> Choice:
    known = _known(path, info.name)
    model = GPUModel.of(info)
    calibration = _CALIBRATIONS.get((path, info.name))
    if calibration is None:
        calibration = _CALIBRATIONS[(path, info.name)] = known.calibration(model)
    return choose(known.picks, shape, dtype, info.arch, gpu=model, calibration=calibration)


def _env_autotune() -> bool:
    return os.environ.get(AUTOTUNE_VARIABLE, "") in ("1", "true", "yes")


def _autotune(path: str, info: DeviceInfo, shape: Shape, dtype: str, device_index: int) -> None:
    """Time the model's best candidates for ``shape`` and store the winner in
    the database at ``path``; a database that cannot be written (locked, read
    only, corrupt) is warned about, and the model's choice runs."""
    from gemmlab.studies.candidates import Device

    device = Device(info.name, f"{info.cc[0]}.{info.cc[1]}", info.arch, info.sm_count, GPUModel.of(info))
    try:
        _autotune_into(path, info, shape, dtype, device, device_index)
    except StoreError as exc:
        # The product still runs (the model's choice); only remembering the winner failed.
        warnings.warn(f"gemmlab.matmul could not store its autotuned pick for {shape} {dtype}: {exc.cause} "
                      f"{exc.fix} The cost model's choice runs instead.", stacklevel=3)  # fmt: skip


def _autotune_into(path: str, info: DeviceInfo, shape: Shape, dtype: str, device: Any, device_index: int) -> None:
    from gemmlab.studies.autotune import autotune_shape
    from gemmlab.studies.sweep import run_record

    with Store.open(path) as store:
        autotune_shape(store, shape, dtype, device, _known(path, info.name).picks,
                       calibration=_CALIBRATIONS.get((path, info.name)), run_record=run_record(),
                       device_index=device_index)  # fmt: skip
    _KNOWN.pop((path, info.name), None)  # read again, with the new pick
    _CALIBRATIONS.pop((path, info.name), None)


def clear_cache() -> None:
    """Forget the picks read so far: the next call reads the database again."""
    _KNOWN.clear()
    _CHOSEN.clear()
    _CALIBRATIONS.clear()


def _db_path(db: str | Path | None) -> Path:
    return Path(db if db is not None else os.environ.get(DB_VARIABLE) or DEFAULT_PATH)


def _known(path: str, gpu_name: str) -> Known:
    """The picks of ``gpu_name`` tuned into the database at ``path``, the
    shipped ones for the shapes they leave (none with
    $GEMMLAB_NO_SHIPPED_TABLES=1), and every candidate time behind them."""
    key = (path, gpu_name)
    if key not in _KNOWN:
        shipped = os.environ.get(NO_SHIPPED_VARIABLE, "") not in ("1", "true", "yes")
        if Path(path).is_file():
            with Store.open(path, readonly=True) as store:
                _KNOWN[key] = known_on(store, gpu_name, shipped=shipped)
        else:
            _KNOWN[key] = known_on(None, gpu_name, shipped=shipped)
    return _KNOWN[key]
