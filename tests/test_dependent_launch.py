"""Programmatic dependent launch without a GPU: which kernels ask for it, that
their sources wait before touching memory, and when the runner's launch
configuration turns it on (the device's compute capability faked)."""

from __future__ import annotations

import cuda.core
import pytest

from gemmlab.backends import nvrtc
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import kernel_source

WAITING = ("tc_small", "sgemm_small_tile", "sgemm_split_k", "sgemm_cluster_split_k")


class _Device:
    def __init__(self, cc: tuple[int, int]) -> None:
        self.compute_capability = cc


def _point(kernel_id: str, shape: Shape, dtype: str = "bfloat16"):
    return catalogue.point(kernel_id, shape, None, dtype)


def _on(monkeypatch, cc: tuple[int, int]) -> None:
    monkeypatch.setattr(cuda.core, "Device", lambda *a, **k: _Device(cc))


def test_only_kernels_that_wait_ask_for_it():
    ids = [spec.id for spec in catalogue.CATALOGUE] + list(catalogue.candidate_ids())
    asking = {kernel_id for kernel_id in ids if catalogue.get(kernel_id).dependent_launch}
    assert asking == set(WAITING)
    for kernel_id in WAITING:
        source = kernel_source(catalogue.get(kernel_id).source)
        body = source[source.index("__global__") :]
        assert "wait_for_previous_launch();" in body, kernel_id
        assert "griddepcontrol.wait" in source, kernel_id
    helper = kernel_source(catalogue.get("tc_small").source)
    assert "griddepcontrol.wait" in helper and "griddepcontrol.launch_dependents" in helper


@pytest.mark.parametrize(
    ("kernel_id", "shape", "dtype"),
    [
        ("tc_small", Shape(4096, 128, 4096), "bfloat16"),
        ("tc_small", Shape(512, 512, 512), "bfloat16-out"),
        ("sgemm_split_k", Shape(256, 256, 256), "float32"),
        ("sgemm_small_tile", Shape(128, 128, 128), "float32"),
    ],
)
def test_hopper_launches_them_with_pdl_and_older_gpus_do_not(monkeypatch, kernel_id, shape, dtype):
    point = _point(kernel_id, shape, dtype)
    _on(monkeypatch, (9, 0))
    config = nvrtc.launch_config(point, point.grid)
    assert config.programmatic_stream_serialization is True
    if point.spec.cluster is not None:  # the grid still counts clusters
        assert config.cluster == point.spec.cluster
        assert config.grid[0] * point.spec.cluster[0] == point.grid[0]
    _on(monkeypatch, (8, 0))
    assert nvrtc.launch_config(point, point.grid).programmatic_stream_serialization is False


def test_the_environment_turns_it_off_and_other_kernels_never_have_it(monkeypatch):
    _on(monkeypatch, (9, 0))
    point = _point("tc_small", Shape(4096, 128, 4096))
    monkeypatch.setenv(nvrtc.DEPENDENT_LAUNCH_ENV, "0")
    assert nvrtc.launch_config(point, point.grid).programmatic_stream_serialization is False
    monkeypatch.delenv(nvrtc.DEPENDENT_LAUNCH_ENV)
    assert nvrtc.dependent_launch(point)
    other = _point("tc_gemv", Shape(16, 4096, 4096))
    assert not nvrtc.dependent_launch(other)
    assert nvrtc.launch_config(other, other.grid).programmatic_stream_serialization is False
