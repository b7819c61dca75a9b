"""Shared fixtures: GPU tests skip with the reason when no GPU is usable."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_unavailable_reason() -> str | None:
    from gemmlab.core import gpu
    from gemmlab.core.errors import NoGPUError

    try:
        gpu.cupy()
    except NoGPUError as exc:
        return str(exc.cause)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "gpu" in item.keywords:
            reason = gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs an NVIDIA GPU: {reason}"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled kernels go to one cache per test session, never the user's."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
