"""The adversarial corpus (tests/adversarial) on a GPU: every entry run the way
gemmlab runs such a kernel (`gemmlab run`'s runner in a watchdog worker, or
`gemmlab grade`'s arm's-length path for a Python submission), and caught by
the check its entry names: refused with the words given, timed honestly
under the share given, or its hidden work counted and named."""

from __future__ import annotations

from pathlib import Path

import pytest

try:  # Python 3.11 and later; tomli (the same parser) before
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.measure import apart, watchdog
from gemmlab.measure.run import run_declared

pytestmark = [pytest.mark.gpu, pytest.mark.whole_gpu]

CORPUS = Path(__file__).resolve().parent / "adversarial"
ENTRIES = tomllib.loads((CORPUS / "corpus.toml").read_text())["entry"]


def _kernel(entry: dict) -> str:
    folder = CORPUS / entry["name"]
    return str(folder / ("matmul.toml" if (folder / "matmul.toml").is_file() else "matmul.py"))


def _measure(entry: dict):
    shape = Shape.square(entry["size"])
    if entry["run"] == "graded":
        return watchdog.isolated(entry["name"], 300, apart.run_apart, _kernel(entry), shape, "float32", batches=5,
                                 launches=4, limit_s=60.0)  # fmt: skip
    return watchdog.isolated(entry["name"], 300, run_declared, _kernel(entry), None, shape, None, "float32", reps=6,
                             max_seconds=3.0)  # fmt: skip


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_each_entry_of_the_corpus_is_caught_by_its_check(entry: dict) -> None:
    expect = entry["expect"]
    try:
        result = _measure(entry)
    except GemmlabError as exc:
        assert expect in ("refused", "refused_or_honest"), f"{entry['name']} was refused: {exc}"
        assert all(w in str(exc) for w in entry["words"]), f"{entry['name']}: {exc}"
        return
    assert expect != "refused", f"{entry['name']} was timed ({result.ratio_to_baseline:.3g}x), not refused"
    assert result.error <= result.tolerance
    if expect in ("honest", "refused_or_honest"):
        assert result.ratio_to_baseline is not None and result.ratio_to_baseline < entry["below"], (
            entry["name"],
            result.ratio_to_baseline,
            result.warnings,
        )
    elif expect == "counted":
        said = " ".join(result.warnings)
        assert all(w in said for w in entry["words"]), (entry["name"], result.warnings)
        assert result.timing.min_ms >= entry["at_least_ms"], (entry["name"], result.timing)
    elif expect == "named":
        seen = " ".join(result.kernels_seen).lower()
        assert all(w in seen for w in entry["words"]), (entry["name"], result.kernels_seen)
