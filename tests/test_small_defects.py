"""Small defects of issue 52: lab.declare's cache folder and its errors, and
`gemmlab dispatch show` in a narrow terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import gemmlab.api as lab
from gemmlab.cli import app
from gemmlab.cli.dispatch import picks_table
from gemmlab.core.errors import DeclarationError
from gemmlab.store.records import Config, Pick
from gemmlab.store.store import Store

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SOURCE = EXAMPLES / "naive_define" / "matmul.cu"
KEYS = dict(function="matmul_naive", problem="matmul", dtypes=["float32"], arguments=["A", "B", "C", "n"],
            grid=["n // TILE", "n // TILE"], block=["TILE", "TILE"], accepts=["n % TILE == 0"], edge="TILE",
            parameters={"TILE": [16, 8, 32]})  # fmt: skip


@pytest.fixture
def caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """GEMMLAB_CACHE and the home folder, each a folder of its own in tmp_path."""
    cache, home = tmp_path / "cache", tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("GEMMLAB_CACHE", str(cache))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(lab.kernels, "DECLARED_DIR", None)
    return cache, home


# --- lab.declare -------------------------------------------------------------------------


def test_declare_writes_under_gemmlab_cache_not_the_home_folder(caches: tuple[Path, Path]) -> None:
    cache, home = caches
    mine = lab.declare(SOURCE, **KEYS)
    assert mine.id == "naive_define/matmul" and mine.spec.block_edges == (16, 8, 32)
    assert mine.spec.declaration.is_relative_to(cache / "declared")
    assert not list(home.rglob("*")), "declare wrote into the home folder"


def test_declare_errors_name_the_users_file_and_the_key_and_keep_nothing(caches: tuple[Path, Path]) -> None:
    cache, _home = caches
    with pytest.raises(DeclarationError) as missing:
        lab.declare(SOURCE, function="matmul_naive")
    with pytest.raises(DeclarationError) as bad_name:
        lab.declare(SOURCE, **{**KEYS, "grid": ["n // TILE", "q"]})
    for caught in (missing, bad_name):
        text = str(caught.value)
        assert str(SOURCE) in text and ".toml" not in text and str(cache) not in text, text
    assert "missing problem" in str(missing.value)
    assert str(bad_name.value).startswith(f"declare({str(SOURCE)!r}), grid[1]:")
    assert not list((cache / "declared").rglob("*.toml")), "a refused declaration was kept"


def test_declare_into_a_cache_that_cannot_be_made_says_so(caches: tuple[Path, Path]) -> None:
    cache, _home = caches
    cache.write_text("a file where the cache folder should be")
    with pytest.raises(DeclarationError, match="cannot write the declaration") as caught:
        lab.declare(SOURCE, **KEYS)
    assert "GEMMLAB_CACHE" in caught.value.fix


# --- dispatch show -------------------------------------------------------------------------


def _pick(m: int, n: int, k: int, kernel: str, dtype: str, median_ms: float, cublas_ms: float) -> Pick:
    return Pick(
        gpu_name="NVIDIA H200", cc="9.0", dtype=dtype, m=m, n=n, k=k, kernel=kernel,
        config=Config.of({"BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 8}), median_ms=median_ms,
        cublas_ms=cublas_ms, verified=True, timing_method="CUDA graph of 50 launches",
        cublas_timing_method="50 back-to-back launches",
    )  # fmt: skip


PICKS = [
    _pick(16, 4096, 4096, "sgemm_skinny", "float32", 0.052341, 0.061234),
    _pick(8192, 8192, 8192, "tc_fp8_blockscaled_tma", "bfloat16-out", 1.387123, 1.402987),
]
FIGURES = ("0.0523", "0.0612", "117.0%", "1.3871", "1.4030", "101.1%")


def _printed(width: int) -> str:
    console = Console(width=width, record=True)
    console.print(picks_table(PICKS, "NVIDIA H200", console.width))
    return console.export_text()


@pytest.mark.parametrize("width", [200, 80, 60])
def test_picks_keep_every_figure_and_name_whole_at_any_width(width: int) -> None:
    text = _printed(width)
    for whole in (*FIGURES, "tc_fp8_blockscaled_tma", "8192x8192x8192", "bfloat16-out", "cuBLAS"):
        assert whole in text, f"{whole!r} cut at {width} columns:\n{text}"
    assert "…" not in text and all(len(line) <= width for line in text.splitlines())


def test_picks_on_a_wide_console_are_one_row_each_with_the_units_in_the_headers() -> None:
    text = _printed(200)
    assert "time [ms]" in text and "% of cuBLAS" in text and "configuration" in text
    row = next(line for line in text.splitlines() if "16x4096x4096" in line)
    assert "sgemm_skinny" in row and "0.0523" in row and "117.0%" in row


def test_dispatch_show_in_an_80_column_terminal_prints_the_figures_whole(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with Store.open(db) as store:
        for pick in PICKS:
            store.set_pick(pick)
    out = CliRunner().invoke(app, ["dispatch", "show", "--db", str(db)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    for whole in (*FIGURES, "tc_fp8_blockscaled_tma", "cuBLAS ms", "% cuBLAS"):
        assert whole in out.output, whole
    assert "…" not in out.output
