"""The "programming models" table and plot (docs/peer-ladders.md): per element
type and shape, the best CUDA C++ rung, the best Triton rung, the best CuTe
DSL rung and cuBLAS, side by side, with each rung's lines of code and compile
time. Pure: it takes result rows (dicts as the store gives them) and the
per-kernel facts, so tests build it from synthetic rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gemmlab.report.plots import Plot, _figure, save_figure

MODELS = ("CUDA C++", "Triton", "CuTe DSL", "cuBLAS")
# The backend a result was run by, as the model it was written in ("peers" is split by kernel).
BACKEND_MODELS = {"nvrtc": "CUDA C++"}


@dataclass(frozen=True)
class Entry:
    """One model's best at one point: the rung, its GFLOPS, its lines of code and compile seconds (None: unknown)."""

    kernel: str
    gflops: float
    lines: int | None = None
    compile_s: float | None = None


@dataclass(frozen=True)
class ModelsRow:
    """One (dtype, M, N, K): each model's best, by model name (absent: no verified result)."""

    dtype: str
    m: int
    n: int
    k: int
    best: Mapping[str, Entry]


def code_lines(text: str) -> int:
    """Lines of code in a kernel's file: neither blank nor only a comment (``//``, ``#``).
    Docstrings and block comments count: the measure is rough, and the same for every model."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith(("//", "#")))


def model_of(row: Mapping, peer_models: Mapping[str, str]) -> str | None:
    """The model a result's kernel is written in: CUDA C++ for NVRTC's, the
    peer rung's own (by kernel id) for the peers backend, None otherwise."""
    if row.get("backend") == "peers":
        return peer_models.get(row["kernel"])
    return BACKEND_MODELS.get(row.get("backend") or "")


def models_rows(
    results: Iterable[Mapping], peer_models: Mapping[str, str],
    lines: Mapping[str, int] | None = None, compile_s: Mapping[str, float] | None = None,
) -> list[ModelsRow]:  # fmt: skip
    """Each point's best rung per model, and cuBLAS (the fastest baseline
    figure measured beside any of them). Rows without GFLOPS (failed, wrong)
    are left out: only verified results count."""
    lines, compile_s = lines or {}, compile_s or {}
    points: dict[tuple, dict[str, Entry]] = {}
    for row in results:
        if row.get("gflops") is None:
            continue
        key = (row["dtype"], row["m"], row["n"], row["k"])
        best = points.setdefault(key, {})
        model = model_of(row, peer_models)
        kernel = row["kernel"]
        if model and (model not in best or row["gflops"] > best[model].gflops):
            best[model] = Entry(kernel, row["gflops"], lines.get(kernel), compile_s.get(kernel))
        baseline = row.get("baseline_gflops")
        if baseline and ("cuBLAS" not in best or baseline > best["cuBLAS"].gflops):
            best["cuBLAS"] = Entry(row.get("baseline_name") or "cuBLAS", baseline)
    return [ModelsRow(*key, best) for key, best in sorted(points.items())]


def _cell(entry: Entry | None, with_facts: bool) -> str:
    if entry is None:
        return "-"
    text = f"{entry.gflops / 1e3:.1f} ({entry.kernel})" if with_facts else f"{entry.gflops / 1e3:.1f}"
    facts = [
        f"{entry.lines} lines" if entry.lines else "",
        f"{entry.compile_s:.1f} s compile" if entry.compile_s else "",
    ]
    facts = [f for f in facts if f]
    return text + (f" [{', '.join(facts)}]" if facts and with_facts else "")


def models_text(rows: list[ModelsRow]) -> str:
    """The table as plain text, TFLOPS with each model's best rung, its lines and compile time."""
    header = ["dtype", "M x N x K", *(f"{m} TFLOPS" for m in MODELS)]
    body = [[r.dtype, f"{r.m} x {r.n} x {r.k}", *(_cell(r.best.get(m), m != "cuBLAS") for m in MODELS)] for r in rows]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in (header, *body))  # fmt: skip


def models_plot(rows: list[ModelsRow], out: Path, stem: str = "programming_models") -> list[Plot]:
    """One panel per element type: grouped bars of each model's best TFLOPS by shape."""
    dtypes = sorted({r.dtype for r in rows})
    if not dtypes:
        return []
    fig, axes = _figure(1, len(dtypes))
    width = 0.8 / len(MODELS)
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        mine = [r for r in rows if r.dtype == dtype]
        for i, model in enumerate(MODELS):
            xs = [j + (i - (len(MODELS) - 1) / 2) * width for j, r in enumerate(mine) if model in r.best]
            ys = [r.best[model].gflops / 1e3 for r in mine if model in r.best]
            ax.bar(xs, ys, width, label=model)
        ax.set_xticks(range(len(mine)), [f"{r.m}" if r.m == r.n == r.k else f"{r.m}x{r.n}x{r.k}" for r in mine])
        ax.set_xlabel("size")
        ax.set_ylabel("TFLOPS")
        ax.set_title(dtype)
        ax.legend(loc="upper left", fontsize="small")
    caption = "Each programming model's fastest verified rung per shape, beside cuBLAS (higher is better)."
    return [save_figure(fig, out, stem, caption)]
