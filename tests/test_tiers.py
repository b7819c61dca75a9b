"""The test tiers' plumbing in conftest: one compile cache per run, and shards
that split a selection into disjoint shares which together are all of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import parse_shard, run_cache_dir, shard_of


def test_one_compile_cache_per_run(tmp_path: Path) -> None:
    """pytest-xdist's workers (basetemp <run>/popen-gwN) share the run's cache; a named cache wins."""
    run = tmp_path / "pytest-7"
    assert run_cache_dir(run, None, None) == run / "cache"
    workers = {run_cache_dir(run / f"popen-{w}", w, None) for w in ("gw0", "gw1")}
    assert workers == {run / "cache"}
    assert run_cache_dir(run, "gw0", str(tmp_path / "ci")) == tmp_path / "ci"


def test_this_run_compiles_into_its_cache(_isolated_cache: Path) -> None:
    from gemmlab.backends.nvrtc import cache_dir

    assert cache_dir().parent == _isolated_cache


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_are_disjoint_and_cover_the_selection(n: int) -> None:
    items = [f"test_{i}" for i in range(20)]
    shares = [shard_of(items, k, n) for k in range(1, n + 1)]
    kept = [item for keep, _ in shares for item in keep]
    assert sorted(kept) == sorted(items) and len(kept) == len(items)
    for keep, others in shares:
        assert sorted(keep + others) == sorted(items)
        assert len(keep) in (len(items) // n, -(-len(items) // n))


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(pytest.UsageError, match="expected K/N"):
        parse_shard(text)


def test_a_shard_parses() -> None:
    assert parse_shard("2/3") == (2, 3)
