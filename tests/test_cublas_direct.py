"""The cuBLAS baseline's direct call (gemmlab.problems.cublas), without a GPU:
finding the loaded library, the calls it makes, and a failing status."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gemmlab.problems import cublas as direct

MAPS = """\
7f00-7f10 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6
7f20-7f30 r-xp 00000000 08:01 2 /opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13
7f40-7f50 r-xp 00000000 08:01 3 /opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13
7f60-7f70 rw-p 00000000 00:00 0
"""


def test_the_loaded_cublas_is_found_and_not_cublaslt(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    found = direct.loaded_library_path("libcublas.so", maps)
    assert found is not None and found.name == "libcublas.so.13"
    assert direct.loaded_library_path("libcudnn.so", maps) is None
    assert direct.loaded_library_path("libcublas.so", tmp_path / "absent") is None


class FakeLib:
    def __init__(self, status: int = 0) -> None:
        self.calls: list[tuple] = []
        self.status = status

    def cublasSetStream_v2(self, handle: int, stream: int) -> int:
        self.calls.append(("stream", handle, stream))
        return 0

    def cublasGemmEx(self, handle: int, *args: int) -> int:
        self.calls.append(("gemm", handle, *args))
        return self.status


def fake_cp(stream: int) -> SimpleNamespace:
    device = SimpleNamespace(get_cublas_handle=lambda: 77)
    return SimpleNamespace(cuda=SimpleNamespace(device=device, get_current_stream=lambda: SimpleNamespace(ptr=stream)))


def test_each_call_sets_the_current_stream_then_runs_the_gemm(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = FakeLib()
    monkeypatch.setattr(direct, "_library", lambda: lib)
    call = direct.gemm_ex(fake_cp(5), (0, 0, 4, 3, 2), keep=(object(),))
    call()
    call()
    assert lib.calls == [("stream", 77, 5), ("gemm", 77, 0, 0, 4, 3, 2)] * 2


def test_a_failing_status_is_an_error_naming_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(direct, "_library", lambda: FakeLib(status=7))
    with pytest.raises(direct.CublasStatusError, match="cublasGemmEx returned cuBLAS status 7"):
        direct.gemm_ex(fake_cp(0), (0,))()


@pytest.mark.parametrize(("dtype", "kind", "compute", "scalar"), [("float32", 0, 68, "f"), ("float64", 1, 70, "d")])
def test_the_gemm_reads_its_scalars_in_its_compute_type(
    monkeypatch: pytest.MonkeyPatch, dtype: str, kind: int, compute: int, scalar: str
) -> None:
    import ctypes

    import numpy as np

    from gemmlab.problems import matmul

    lib = FakeLib()
    monkeypatch.setattr(direct, "_library", lambda: lib)
    array = lambda rows, cols, ptr: SimpleNamespace(shape=(rows, cols), data=SimpleNamespace(ptr=ptr))
    a, b, c = array(3, 2, 1000), array(2, 4, 2000), array(3, 4, 3000)
    call = matmul.cublas_gemm(fake_cp(0), a, b, c, dtype, alpha=2.5, beta=-1.0)  # keeps its host scalars alive
    call()
    (_, _, *args) = lib.calls[1]
    # C^T = B^T . A^T: n, m, k, then alpha, B (ld n), A (ld k), beta, C (ld n), compute, algorithm
    assert args[2:5] == [4, 3, 2] and args[6:9] == [2000, kind, 4] and args[9:12] == [1000, kind, 2]
    assert args[13:18] == [3000, kind, 4, compute, -1]
    read = {"f": ctypes.c_float, "d": ctypes.c_double}[scalar]
    assert read.from_address(args[5]).value == 2.5 and read.from_address(args[12]).value == -1.0
    assert np.dtype(scalar).itemsize == args[12] - args[5]
