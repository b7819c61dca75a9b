"""Shared fixtures: GPU tests skip with the reason when no GPU is usable, and
every test of a run compiles into one cache of its own."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Names a compile cache that several pytest runs share, so that a kernel compiled
# by one is not compiled again by the next (.ci/run sets it for its two tiers).
SHARED_CACHE_VARIABLE = "GEMMLAB_TEST_CACHE"


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


def run_cache_dir(basetemp: Path, worker: str | None, shared: str | None) -> Path:
    """The compile cache of one test run. pytest-xdist gives each worker its own
    basetemp inside the run's, so the workers' parent is the run's and they
    share one cache: a kernel instantiation compiles once per run, whichever
    test or worker needs it first (entries are written atomically)."""
    if shared:
        return Path(shared)
    return (basetemp.parent if worker else basetemp) / "cache"


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled kernels go to the run's cache, never the user's. Session-wide,
    so module fixtures that compile see it too."""
    root = run_cache_dir(
        tmp_path_factory.getbasetemp(), os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(SHARED_CACHE_VARIABLE)
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GEMMLAB_CACHE", str(root))
        yield root
