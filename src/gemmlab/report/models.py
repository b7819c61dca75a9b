"""The "programming models" table and plot (docs/peer-ladders.md): per element
type and shape, the best CUDA C++ rung, the best Triton rung, the best CuTe
DSL rung and cuBLAS, side by side, with each rung's lines of code and compile
time. Pure but for :func:`with_facts`, which compiles the winners: it takes
result rows (dicts as the store gives them) and the per-kernel facts, so tests
build it from synthetic rows."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from gemmlab import backends
from gemmlab.kernels import catalogue
from gemmlab.kernels.peers.spec import MODELS as PEER_LANGUAGES
from gemmlab.kernels.peers.spec import PEERS
from gemmlab.measure import compile_time
from gemmlab.measure.compile_time import CompileTime
from gemmlab.report.drawing import Plot, figure, save_figure

MODELS = ("CUDA C++", "Triton", "CuTe DSL", "cuBLAS")
# The backend a result was run by, as the model it was written in (the peers' is split by kernel).
BACKEND_MODELS = {backends.NVRTC: "CUDA C++"}
# Each peer rung's model, by kernel id.
PEER_MODELS = {spec.id: PEER_LANGUAGES[spec.model].name for spec in PEERS}


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
    if row.get("backend") == backends.PEERS:
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
    points: dict[tuple[str, int, int, int], dict[str, Entry]] = {}
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
        # A rung whose facts were gathered but whose compile could not be timed here.
        "compile -" if entry.lines and entry.compile_s is None else "",
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
    fig, axes = figure(1, len(dtypes))
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


# --- the table in `gemmlab report` ------------------------------------------------------


@dataclass(frozen=True)
class ModelsTable:
    """One GPU's table: the architecture its results ran on, the rows with
    their rungs' facts, and why any compile time is unknown."""

    gpu_name: str
    arch: str
    rows: list[ModelsRow]
    notes: tuple[str, ...] = ()


def _cuda_ids() -> set[str]:
    return {*catalogue.kernel_ids(), *catalogue.candidate_ids()}


def _with_backend(row: Mapping, cuda_ids: set[str]) -> dict | None:
    """``row`` with its backend, or None when no model of the table wrote it. Rows
    from before results recorded their backend (schema v5) are known by kernel id."""
    backend = row.get("backend") or (backends.PEERS if row["kernel"] in PEER_MODELS else backends.NVRTC)
    if backend == backends.PEERS and row["kernel"] in PEER_MODELS:
        return {**row, "backend": backend}
    if backend == backends.NVRTC and row["kernel"] in cuda_ids:
        return {**row, "backend": backend}
    return None


def model_results(rows: Iterable[Mapping]) -> dict[str, list[dict]]:
    """By GPU, the rows that go into the table: peer rungs' and the CUDA C++
    rungs' that solve the same problem (the sgemm ladder's beside the FP32
    peers, the tensor ladder's beside the bfloat16 ones), at the points where
    a peer rung has a result. Empty when no row is a peer rung's."""
    cuda_ids = _cuda_ids()
    known = [r for r in map(lambda row: _with_backend(row, cuda_ids), rows) if r is not None]
    peer_rows = [r for r in known if r["backend"] == backends.PEERS]
    problems = {(r["dtype"], catalogue.get(r["kernel"]).problem.name) for r in peer_rows}
    points = {(r.get("gpu_name"), r["dtype"], r["m"], r["n"], r["k"]) for r in peer_rows}
    by_gpu: dict[str, list[dict]] = {}
    for r in known:
        same_problem = (r["dtype"], catalogue.get(r["kernel"]).problem.name) in problems
        if same_problem and (r.get("gpu_name"), r["dtype"], r["m"], r["n"], r["k"]) in points:
            by_gpu.setdefault(r.get("gpu_name") or "unknown GPU", []).append(r)
    return by_gpu


def device_arch(rows: Iterable[Mapping]) -> str:
    """The architecture (sm_XY) the rows ran on: their most common ``arch``
    without its a/f suffix (a wgmma rung records sm_90a), else their ``cc``."""
    found = Counter(r["arch"].rstrip("af") for r in rows if r.get("arch"))
    found.update(f"sm_{r['cc'].replace('.', '')}" for r in rows if not r.get("arch") and r.get("cc"))
    if not found:
        return ""
    return found.most_common(1)[0][0]


def with_facts(gpu_name: str, results: list[dict]) -> ModelsTable:
    """The table of one GPU's results, each winning rung with its lines of code
    and one compile per rung and element type, timed now on this machine for
    the architecture the results ran on (:mod:`gemmlab.measure.compile_time`)."""
    arch = device_arch(results)
    rows = models_rows(results, PEER_MODELS)
    timed: dict[tuple[str, str], CompileTime] = {}
    lines: dict[str, int] = {}  # by rung: its file is read once, however many rows it wins
    notes: dict[str, str] = {}
    filled = []
    for row in rows:
        best = dict(row.best)
        for model, entry in row.best.items():
            if model == "cuBLAS":
                continue
            spec = catalogue.get(entry.kernel)
            key = (entry.kernel, row.dtype)
            if key not in timed:
                timed[key] = (compile_time.time_compile(spec, row.dtype, arch) if arch
                              else CompileTime(None, "the results record no architecture"))  # fmt: skip
            if timed[key].seconds is None:
                notes.setdefault(f"{entry.kernel} ({row.dtype})", timed[key].reason)
            if entry.kernel not in lines:
                lines[entry.kernel] = code_lines(compile_time.source_text(spec))
            best[model] = replace(entry, lines=lines[entry.kernel], compile_s=timed[key].seconds)
        filled.append(replace(row, best=best))
    return ModelsTable(gpu_name, arch, filled, tuple(f"{rung}: {why}" for rung, why in notes.items()))


def models_csv(tables: list[ModelsTable]) -> str:
    """The tables as one CSV: per GPU and point, each model's TFLOPS, rung,
    lines and compile seconds (empty: unknown)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["gpu", "arch", "dtype", "m", "n", "k", *(f"{m} {fact}" for m in MODELS for fact in _CSV_FACTS)])
    for table in tables:
        for r in table.rows:
            cells = [cell for model in MODELS for cell in _csv_cells(r.best.get(model))]
            writer.writerow([table.gpu_name, table.arch, r.dtype, r.m, r.n, r.k, *cells])
    return out.getvalue()


_CSV_FACTS = ("TFLOPS", "rung", "lines", "compile s")


def _csv_cells(entry: Entry | None) -> list[str]:
    if entry is None:
        return ["", "", "", ""]
    compile_s = "" if entry.compile_s is None else f"{entry.compile_s:.2f}"
    return [f"{entry.gflops / 1e3:.2f}", entry.kernel, str(entry.lines or ""), compile_s]
