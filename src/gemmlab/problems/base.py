"""What "running a kernel" means for each kind of problem: the inputs it
needs, the arguments it takes, the reference it is checked against and the
library routine it is compared with. The runner knows none of these details.
"""

from __future__ import annotations

from collections.abc import Callable
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
    """Device buffers for one point, ready to launch and check."""

    args: tuple
    poison: Callable[[], None]
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


def random_matrix(cp: Any, rng: Any, rows: int, cols: int, dtype: str) -> Any:
    if dtype == "int32":
        return rng.integers(-INT_RANGE, INT_RANGE + 1, size=(rows, cols), dtype=cp.int32)
    return rng.uniform(-1.0, 1.0, size=(rows, cols)).astype(dtype)


def relative_error(cp: Any, out: Any, ref: Any) -> float:
    """Frobenius-norm relative error in float64; NaN anywhere gives NaN."""
    diff = out.astype(cp.float64) - ref
    ref_norm = float(cp.linalg.norm(ref))
    err = float(cp.linalg.norm(diff))
    return err / ref_norm if ref_norm else err


def poison(cp: Any, out: Any) -> None:
    """Fill the output with a value no correct kernel writes."""
    if out.dtype.kind == "f":
        out.fill(cp.nan)
    else:
        out.fill(cp.iinfo(out.dtype).min)


def _i32(value: int) -> Any:
    import numpy as np

    return np.int32(value)


@dataclass(frozen=True)
class Problem:
    """A kind of work: how to set it up on the device and how it is measured.

    ``metric`` names the headline figure: "gflops" for compute kernels, "gbs"
    (GB/s of bytes read + written) for memory-bound ones.
    """

    name: str
    prepare: Callable[[Any, Point, Any], Prepared]
    device_bytes: Callable[[Point], int]
    metric: str = "gflops"
