"""Shared fixtures: GPU tests skip with the reason when no GPU is usable, and
every test of a run compiles into one cache of its own."""

from __future__ import annotations

import functools
import importlib.util
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shard",
        metavar="K/N",
        help="run only the K-th (1 to N) of N equal shares of the tests -m selects (benchmarks/scripts/gpu_tiers.sh)",
    )


def parse_shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise pytest.UsageError(f"--shard {text}: expected K/N with 1 <= K <= N, e.g. 1/2")
    return int(k), int(n)


def shard_of(items: list, k: int, n: int) -> tuple[list, list]:
    """The tests of shard k of n, and the others. Every n-th test from the k-th
    on, in collection order: each shard gets a like share of every file (its
    slow and quick tests alike), and every process, an xdist worker too, draws
    the same share from the same collection."""
    return items[k - 1 :: n], [item for i, item in enumerate(items) if i % n != k - 1]


@pytest.hookimpl(trylast=True)  # after -m has deselected, so that a shard is a share of what is left
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "gpu" in item.keywords:
            reason = gpu_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs an NVIDIA GPU: {reason}"))
            elif "whole_gpu" in item.keywords and os.environ.get("PYTEST_XDIST_WORKER"):
                # The README's command runs the suite in pytest-xdist workers; a timing beside other tests is not one.
                item.add_marker(pytest.mark.skip(reason="times a kernel, so it needs the GPU to itself: run it "
                                                 "without -n (benchmarks/scripts/gpu_tiers.sh whole)"))  # fmt: skip
    if config.getoption("shard"):
        keep, others = shard_of(items, *parse_shard(config.getoption("shard")))
        config.hook.pytest_deselected(items=others)
        items[:] = keep


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


# The CPU baselines cpu_naive and cpu_blocked compile with numba, which comes with
# the test and cpu extras; without it their tests skip instead of failing.
needs_numba = pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba is not installed (pip install 'gemmlab[cpu]')"
)


def marked_smoke(cases: list[tuple], smoke: tuple) -> list:
    """``cases`` for a parametrize with ``smoke``, one of them, in the smoke tier.
    Collection fails if it is none of them, so the tier cannot lose a layer unseen."""
    if smoke not in cases:
        raise ValueError(f"the smoke case {smoke} is not among the cases")
    return [pytest.param(*case, marks=pytest.mark.smoke) if case == smoke else case for case in cases]


ROOT = Path(__file__).resolve().parents[1]


def gemmlab_process(*args: str, limit_s: float) -> subprocess.CompletedProcess:
    """The command line in a fresh process, from the repository's root (for a
    test whose kernel may fault or hang: the process, not pytest, takes it)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from gemmlab.cli import main; main()", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=limit_s)  # fmt: skip


# How a Python submission declares itself (measure/apart's tests): matmul in float32, on CuPy arrays.
PYTHON_SUBMISSION_DECLARED = (
    'GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}\n'
)


def python_submission(parent: Path, name: str, body: str) -> str:
    """The path of a submission folder ``parent/name`` whose matmul.py is
    ``body`` with the declaration above: one per hostile behaviour a test tries."""
    folder = parent / name
    folder.mkdir(parents=True)
    path = folder / "matmul.py"
    path.write_text(body + "\n" + PYTHON_SUBMISSION_DECLARED)
    return str(path)


def database_at(path: Path, version: int) -> sqlite3.Connection:
    """A results database at ``path`` exactly as schema ``version`` left it (its
    first ``version`` migrations, nothing after), open for a test to fill; the
    test commits and closes it before gemmlab opens the file."""
    from gemmlab.store.store import MIGRATIONS

    conn = sqlite3.connect(path)
    for steps in MIGRATIONS[:version]:
        for step in steps:
            step(conn) if callable(step) else conn.execute(step)
    conn.execute(f"PRAGMA user_version = {version}")
    return conn


def needs_tool(find: Callable[[], object], tool: str) -> pytest.MarkDecorator:
    """Skip where ``find`` (find_sanitizer, find_ncu) does not find ``tool``,
    with gemmlab's own words for why."""
    from gemmlab.core.errors import GemmlabError

    try:
        find()
    except GemmlabError as exc:
        return pytest.mark.skipif(True, reason=f"needs {tool}: {exc.cause}")
    return pytest.mark.skipif(False, reason=f"{tool} was found")
