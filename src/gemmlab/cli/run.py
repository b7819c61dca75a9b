"""`gemmlab run`: one kernel, verified and timed beside its library."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

import gemmlab.api as lab
from gemmlab.api.results import DEFAULT_PATH
from gemmlab.api.run import (
    best,
    config_label,
    host_backend,
    host_seconds,
    kernels_seen_text,
    measure_on_host,
    on_host,
    refuse_block,
    run_kernels,
)
from gemmlab.cli.app import (
    BlockOpt,
    DtypeOpt,
    KernelOrFileArg,
    KOpt,
    MOpt,
    NOpt,
    SizeOpt,
    app,
    console,
    emit_json,
    err_console,
    friendly,
    parse_shape,
)
from gemmlab.core.errors import ConstraintError, GemmlabError
from gemmlab.core.shapes import Shape
from gemmlab.core.timing import within_noise


@app.command()
@friendly
def run(
    kernel_id: KernelOrFileArg,
    dims: Annotated[
        list[int] | None,
        typer.Argument(
            help="M N K (or one size N) instead of --m/--n/--k; `gemmlab run best M N K` runs the dispatcher's pick.",
            show_default=False,
        ),
    ] = None,
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    block: BlockOpt = None,
    dtype: DtypeOpt = None,
    reps: Annotated[int, typer.Option(min=1, help="Timed repetitions.")] = 20,
    flush_l2: Annotated[bool, typer.Option("--flush-l2", help="Evict the L2 cache before each repetition.")] = False,
    seed: Annotated[int | None, typer.Option(help="Random seed (default: fresh inputs).")] = None,
    db: Annotated[
        Path, typer.Option("--db", help="Results database to read tuned configurations from.")
    ] = DEFAULT_PATH,
    no_tuned: Annotated[
        bool, typer.Option("--no-tuned", help="Use the catalogue's default configuration, not the tuned one.")
    ] = False,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            help="A tunable kernel's parameters, KEY=VALUE comma-separated (SCALING=1, or BN=192,CLUSTER=1), over its "
            "default; the tuned configuration is then not used. For the first kernel, not those of --vs.",
        ),
    ] = None,
    vs: Annotated[
        str | None,
        typer.Option("--vs", help="Other kernels (ids or declarations, comma-separated) to run on the same shape."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=1.0, help="Seconds a user's kernel may take before it is stopped as a hang (default: 80, more if slow)."
        ),
    ] = None,
) -> None:
    """Run one kernel: verify it against a float64 reference, time it, compare with cuBLAS.

    A kernel tuned on this GPU (`gemmlab tune`) runs with its stored configuration for the size's class.
    `gemmlab run best M N K --dtype fp32|bf16` runs what the dispatcher picks for the shape (`gemmlab dispatch tune`).
    """
    if kernel_id == BEST:
        run_best(shape_of(dims, size, m, n, k), dtype, db, reps, as_json)
        return
    others = [name.strip() for name in (vs or "").split(",") if name.strip()]
    backend = host_backend(kernel_id)
    if backend is not None:
        gpu_only = {"--vs": bool(others), "--config": config is not None, "--flush-l2": flush_l2}
        refuse_on_host(kernel_id, [flag for flag, given in gpu_only.items() if given])
        refuse_block(kernel_id, block, ())
        run_on_host(backend, kernel_id, shape_of(dims, size, m, n, k), dtype, reps, seed, as_json)
        return
    target = lab.kernel(kernel_id).spec
    refuse_block(target.id, block, target.block_edges, target.max_edge)
    for name in others:
        if on_host(name):
            refuse_on_host(name, ["--vs"])
    # Every product needs K (matmul, the FP32 ladder, the tensor cores); the memory lab's kernels do not.
    shape = shape_of(dims, size, m, n, k, target.problem.metric != "gbs")
    given = parse_config(config) if config is not None else None
    specs = [target, *(lab.kernel(name).spec for name in others)]
    results = run_kernels(specs, shape, block, dtype, db=db, tuned=not no_tuned, config=given, timeout=timeout,
                                 reps=reps, flush_l2=flush_l2, seed=seed)  # fmt: skip
    if as_json:
        rows = [{**r.to_dict(), "config_source": source} for r, source in results]
        emit_json(rows[0] if not others else rows)
        return
    console.print(result_table(*results[0]))
    if others:
        console.print(comparison_table([r for r, _ in results]))
    for r, _ in results:
        for w in r.warnings:
            err_console.print(f"[yellow]warning:[/] {r.kernel}: {w}" if others else f"[yellow]warning:[/] {w}")


BEST = "best"  # `gemmlab run best M N K`: the dispatcher's pick


def refuse_on_host(kernel: str, flags: list[str]) -> None:
    """ConstraintError naming the options that only a GPU kernel's run takes, given for a CPU baseline."""
    if not flags:
        return
    raise ConstraintError(
        f"{kernel} runs on the CPU, and {', '.join(flags)} applies only to kernels run on the GPU.",
        f"Run it alone; to compare it with GPU kernels, sweep them together: "
        f"gemmlab sweep --kernels {kernel},tiled --sizes 512.",
    )


def run_on_host(backend: Any, kernel_id: str, shape: Shape, dtype: str | None, reps: int,
                seed: int | None, as_json: bool) -> None:  # fmt: skip
    """A CPU baseline verified against the float64 reference and timed on this host, as a sweep measures it."""
    kind = dtype or backend.dtypes(kernel_id)[0]
    seconds = host_seconds(backend, kernel_id, shape, kind)
    # Announced only for a point that will run: the backend's own error names what stops one that will not.
    if seconds is not None:
        took = f"{seconds / 60:,.0f} minutes" if seconds > 120 else f"{seconds:.0f} s"
        err_console.print(f"{kernel_id} on {shape}: each call may take about {took} (at a desktop core's speed, "
                          "several calls in all); Ctrl-C stops it.", highlight=False)  # fmt: skip
    row = measure_on_host(backend, kernel_id, shape, kind, reps, seed)
    if as_json:
        emit_json({**row, "timing": asdict(row["timing"])})
        return
    console.print(host_table(row))
    for w in row["warnings"]:
        err_console.print(f"[yellow]warning:[/] {w}")


def shape_of(
    dims: list[int] | None, size: int | None, m: int | None, n: int | None, k: int | None, needs_k: bool = True
) -> Shape:  # fmt: skip
    """The shape from positional sizes (M N K, or N for a square) or from the options, not both."""
    if not dims:
        return parse_shape(size, m, n, k, needs_k)
    if any(v is not None for v in (size, m, n, k)):
        raise GemmlabError(
            "Give the sizes as M N K or as options, not both.", "Example: gemmlab run best 16 4096 4096."
        )
    if len(dims) not in (1, 3):
        raise GemmlabError(f"Give one size (a square) or three (M N K), not {len(dims)}.",
                           "Example: gemmlab run best 16 4096 4096.")  # fmt: skip
    return parse_shape(dims[0], None, None, None) if len(dims) == 1 else parse_shape(None, dims[0], dims[1], dims[2])


def run_best(shape: Shape, dtype: str | None, db: Path, reps: int, as_json: bool) -> None:
    """The dispatcher's pick for ``shape``, why it was picked, run, verified and timed beside cuBLAS."""
    choice, result = best(shape, dtype, db, reps)
    if as_json:
        base = result.baseline_timing
        methods = {"timing_method": result.timing.method, "baseline_timing_method": base.method if base else None}
        emit_json({**result.to_dict(), "pick": choice.reason, "why": choice.why(), **methods})
        return
    console.print(f"pick: {choice.kernel} {config_label(choice.config)} ({choice.reason}: {choice.why()})",
                  highlight=False)  # fmt: skip
    console.print(result_table(result, choice.reason))
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/] {w}")


def parse_config(text: str) -> dict[str, int]:
    """``--config``'s KEY=VALUE pairs, comma-separated, as a configuration; a
    GemmlabError naming the part it cannot read."""
    found: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value.lstrip("-").isdigit():
            raise GemmlabError(
                f"--config: '{part}' is not KEY=VALUE with a whole number for VALUE.",
                "Example: --config SCALING=1, or --config BN=192,CLUSTER=1.",
            )
        if key in found:
            raise GemmlabError(f"--config gives {key} twice.", f"Give each parameter once: --config {key}={value}.")
        found[key] = int(value)
    return found


def host_table(row: dict) -> Table:
    """A CPU baseline's result (a row as the CPU backend returns it)."""
    t = row["timing"]
    shape = Shape(row["m"], row["n"], row["k"])
    rows = [
        ("time (median) [ms]", f"{t.median_ms:.4f}"),
        ("time min / max [ms]", f"{t.min_ms:.4f} / {t.max_ms:.4f}"),
        ("repetitions", str(t.reps)),
        ("timed by", row["timing_method"]),
        ("GFLOPS", f"{row['gflops']:,.1f}"),
        ("check against the reference", f"{_error_text(row['error'])} (tolerance {row['tolerance']:.0e})"),
    ]
    return figure_table(f"{row['kernel']}  {shape}  {row['dtype']}  on the CPU: {row['host']['cpu']}", rows)


def figure_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """One result's figures, a (label, value) a row; a label's "[ms]" is text, not markup."""
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in rows:
        table.add_row(escape(label), value)
    return table


def comparison_table(results: list[Any]) -> Table:
    """The kernels of one `run --vs`, one row each, on the same shape and device."""
    first = results[0]
    memory_bound = first.metric == "gbs"
    unit = "GB/s" if memory_bound else "GFLOPS"
    table = Table(title=f"{first.shape}  {first.dtype}  on {first.device['name']}")
    for col in ("kernel", "block edge", "time (median) [ms]", unit, "ratio to library", "error"):
        table.add_column(escape(col), justify="left" if col == "kernel" else "right")
    for r in results:
        figure = r.gbytes_per_s if memory_bound else r.gflops
        ratio = ratio_text(r) if r.ratio_to_baseline is not None else "-"
        edge, error = str(r.block_edge or "-"), _error_text(r.error)
        table.add_row(r.kernel, edge, f"{r.timing.median_ms:.4f}", f"{figure:,.1f}", ratio, error)
    return table


def _error_text(error: float) -> str:
    """A result's error against the reference, as every table shows it."""
    return "exact" if error == 0 else f"{error:.2e}"


def _resources_text(resources: Any) -> str:
    """Registers and shared memory; "unknown" where the backend could not read
    them (a Python kernel whose compiled code gemmlab does not see)."""
    registers = "unknown" if resources.registers is None else str(resources.registers)
    smem = "unknown" if resources.smem_bytes is None else f"{resources.smem_bytes} B"
    return f"{registers} / {smem}"


def result_table(r: Any, config_source: str | None = None) -> Table:
    t = r.timing
    memory_bound = r.metric == "gbs"
    headline = ("GB/s (read + written)", f"{r.gbytes_per_s:,.1f}") if memory_bound else ("GFLOPS", f"{r.gflops:,.1f}")
    rows = [
        ("time (median) [ms]", f"{t.median_ms:.4f}"),
        ("time min / max [ms]", f"{t.min_ms:.4f} / {t.max_ms:.4f}"),
        ("repetitions", str(t.reps)),
        ("timed by", t.method),
        headline,
        ("check against the reference", f"{_error_text(r.error)} (tolerance {r.tolerance:.0e})"),
        ("grid x block", f"{r.grid} x {r.block}" if any(r.grid) else "chosen by the function"),
        ("registers / static smem", _resources_text(r.resources)),
    ]
    if r.config:
        rows.append((f"configuration ({config_source})" if config_source else "configuration", config_label(r.config)))
    if r.baseline_timing is not None:
        lib = r.baseline_gbytes_per_s if memory_bound else r.baseline_gflops
        rows += [(f"{r.baseline_name} {headline[0]}", f"{lib:,.1f}"),
                 ("library timed by", r.baseline_timing.method),
                 ("ratio to library", ratio_text(r))]  # fmt: skip
    rows += measured_rows(r)
    title = f"{r.kernel}  {r.shape}  block edge {r.block_edge or '-'}  {r.dtype}  on {r.device['name']}"
    return figure_table(title, rows)


def ratio_text(r: Any) -> str:
    """The ratio to the library with its 95% interval, and "within noise" where that holds 1."""
    text = f"{r.ratio_to_baseline:.1%}"
    interval = getattr(r, "ratio_interval", None)
    if interval:
        text += f" (95%: {interval[0]:.1%}-{interval[1]:.1%}{', within noise' if within_noise(interval) else ''})"
    return text


def measured_rows(r: Any) -> list[tuple[str, str]]:
    """How the figures were taken (gemmlab.measure.series): what the timed
    calls ran, the input sets and L2, the floor, energy."""
    rows = []
    if getattr(r, "activity", ""):
        rows.append(("GPU work seen by", r.activity))
    if getattr(r, "kernels_seen", None):
        rows.append(("kernels the timed calls ran", kernels_seen_text(r.kernels_seen, limit=4)))
    if getattr(r, "input_sets", 0):
        rows.append(("input sets (renewed before every launch)", f"{r.input_sets}; {r.l2_policy}"))
    if getattr(r, "floor_ms", None):
        rows.append(("least possible time [ms]", f"{r.floor_ms:.4f}"))
    energy = [(side, j) for side, j in (("kernel", r.energy_j), ("library", r.baseline_energy_j)) if j]
    if energy:
        gflop = 2 * r.m * r.n * r.k / 1e9
        rows.append(("energy per launch", "; ".join(f"{side} {j * 1e3:.3g} mJ ({gflop / j:,.0f} GFLOP/J)"
                                                    for side, j in energy)))  # fmt: skip
    return rows
