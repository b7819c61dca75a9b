"""benchmarks/scripts/heldout_bench.py without a GPU: the shapes it draws (the
same for a seed, within each distribution's bounds, a fresh draw otherwise)
and the summary it reports."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("heldout_bench", ROOT / "benchmarks" / "scripts" / "heldout_bench.py")
bench = importlib.util.module_from_spec(_SPEC)
sys.modules["heldout_bench"] = bench
_SPEC.loader.exec_module(bench)  # type: ignore[union-attr]


@pytest.mark.parametrize("distribution", list(bench.DISTRIBUTIONS))
def test_a_seed_draws_the_same_shapes_and_another_seed_others(distribution: str) -> None:
    first = bench.draw(distribution, 40, seed=7)
    assert first == bench.draw(distribution, 40, seed=7)
    assert first != bench.draw(distribution, 40, seed=8)
    assert len(set(first)) > 20  # drawn, not a handful of shapes repeated


def test_each_distribution_keeps_to_its_bounds() -> None:
    for m, n, k in bench.draw("log-uniform", 500, seed=1):
        assert all(bench.LOW <= d <= bench.HIGH for d in (m, n, k))
    llm = bench.draw("llm", 500, seed=1)
    assert all(1 <= m <= 8192 and (n, k) in bench.LLM_WEIGHTS for m, n, k in llm)
    assert min(m for m, _, _ in llm) < 16 and max(m for m, _, _ in llm) > 2048  # decode and prefill both
    for dims in bench.draw("squares-rects", 500, seed=1):
        assert max(dims) <= bench.HIGH and min(dims) >= bench.LOW
        assert max(dims) // min(dims) in (1, 2, 3, 4, 5, 6, 7, 8, 16)  # a square or a 1:2..1:8 rectangle


def test_the_log_uniform_draw_covers_every_decade() -> None:
    sides = [d for shape in bench.draw("log-uniform", 400, seed=3) for d in shape]
    decades = {int(math.log10(s)) for s in sides}
    assert decades == {1, 2, 3, 4}


def test_the_summary_is_the_geomean_the_tenth_percentile_and_the_minimum() -> None:
    shares = [100.0] * 9 + [25.0]
    s = bench.summary(shares)
    assert s["count"] == 10 and s["min"] == 25.0 and s["p10"] == 25.0
    assert s["geomean"] == pytest.approx(math.exp((9 * math.log(100) + math.log(25)) / 10))
    assert bench.summary(list(range(1, 101)))["p10"] == 10
    assert bench.summary([]) == {"count": 0}


def test_two_runs_of_one_seed_are_compared_side_by_side(tmp_path: Path) -> None:
    import json
    import subprocess

    def run(percents: list[float], kernels: list[str], seed: int = 3) -> dict:
        where = {"distribution": "llm", "dtype": "float32", "m": 8, "n": 4096, "k": 4096, "config": {}, "pick": "model"}
        points = [{**where, "kernel": k, "percent": p} for p, k in zip(percents, kernels, strict=True)]
        return {"seed": seed, "device": "GPU X", "date": "2026-11-29", "points": points}

    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(run([50.0, 80.0], ["a", "b"])))
    after.write_text(json.dumps(run([90.0, 80.0], ["c", "b"])))
    script = ROOT / "benchmarks" / "scripts" / "heldout_compare.py"
    shown = subprocess.run([sys.executable, str(script), str(before), str(after)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert f"geomean {math.sqrt(50 * 80):6.1f}%" in shown.stdout
    assert f"geomean {math.sqrt(90 * 80):6.1f}%" in shown.stdout
    assert "a 50.0% -> c 90.0%" in shown.stdout and "b 80.0% -> b" not in shown.stdout
    after.write_text(json.dumps(run([90.0, 80.0], ["c", "b"], seed=4)))
    other = subprocess.run([sys.executable, str(script), str(before), str(after)], capture_output=True, text=True)
    assert other.returncode != 0 and "different shapes" in other.stderr


def test_a_sample_suite_is_drawn_from_a_seed_and_reads_as_a_suite(tmp_path: Path) -> None:
    import subprocess

    from gemmlab.studies.suite import load_suite

    out = tmp_path / "sample.toml"
    script = ROOT / "benchmarks" / "scripts" / "sample_suite.py"
    done = subprocess.run([sys.executable, str(script), str(out), "--seed", "11", "--count", "6"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "seed 11" in out.read_text().splitlines()[0]
    suite = load_suite("full", out)
    drawn = {s for name in bench.DISTRIBUTIONS for s in bench.draw(name, 6, 11)}
    assert {(s.m, s.n, s.k) for s in (e.shape for e in suite.shapes)} == drawn
    assert len(load_suite("quick", out).shapes) == len(suite.shapes)
    assert suite.dtypes == ("float32", "bfloat16", "bfloat16-out")
