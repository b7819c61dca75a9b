"""The command line: a thin shell over gemmlab's Python API."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gemmlab import catalogue
from gemmlab.catalogue import Shape
from gemmlab.errors import DeviceLimitError, GemmlabError
from gemmlab.store import DEFAULT_PATH
from gemmlab.tune import config_label, stored_tuned_spec

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="gemmlab: run, verify, time and explain GPU matrix-multiplication kernels.",
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def friendly(fn: Callable) -> Callable:
    """Turn a GemmlabError into one line on stderr and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GemmlabError as exc:
            # escape(): a message quotes what the user typed, which may look like markup ('[/x]').
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("interrupted; results stored so far are kept.")
            raise typer.Exit(130) from None

    return wrapper


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, tuple | set):
        return list(obj)
    return str(obj)


def parse_shape(size: int | None, m: int | None, n: int | None, k: int | None, needs_k: bool = True) -> Shape:
    if size is not None and any(v is not None for v in (m, n, k)):
        raise GemmlabError(
            "Give either --size or --m/--n/--k, not both.", "Example: --size 1024, or --m 512 --n 256 --k 128."
        )
    given = {"--size": size, "--m": m, "--n": n, "--k": k}
    if bad := [f"{flag} {value}" for flag, value in given.items() if value is not None and value < 1]:
        raise GemmlabError(
            f"Sizes must be positive whole numbers (got {', '.join(bad)}).",
            "Example: --size 1024, or --m 512 --n 256 --k 128.",
        )
    if size is not None:
        return Shape.square(size)
    if k is None and not needs_k:
        k = 1  # copy, transpose and vecadd work on an M x N matrix; K plays no part
    if None in (m, n, k):
        raise GemmlabError("A size is needed.", "Give --size N for a square product, or all of --m, --n and --k.")
    return Shape(m, n, k)  # type: ignore[arg-type]


# Options shared by the commands that take one point (run, profile, ...).
KernelArg = Annotated[str, typer.Argument(help="A catalogue id (see `gemmlab kernels`).")]
SizeOpt = Annotated[int | None, typer.Option(help="Square size N (M = N = K).")]
MOpt = Annotated[int | None, typer.Option("--m", help="Rows of A and C.")]
NOpt = Annotated[int | None, typer.Option("--n", help="Columns of B and C.")]
KOpt = Annotated[int | None, typer.Option("--k", help="Columns of A, rows of B.")]
BlockOpt = Annotated[int | None, typer.Option(help="Block edge (default: the kernel's largest documented).")]
DtypeOpt = Annotated[str | None, typer.Option(help="float32, int32, ... (default: the kernel's first).")]


@app.command()
@friendly
def devices(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the GPUs: name, compute capability, SMs, memory, clocks, peak FP32 rate and bandwidth."""
    from gemmlab import gpu

    infos = [gpu.describe(i) for i in range(gpu.device_count())]
    if as_json:
        emit_json([i.to_dict() for i in infos])
        return
    table = Table(title="GPUs")
    for col in ("#", "name", "CC", "SMs", "memory", "SM clock", "mem clock", "L2", "peak FP32", "peak BW", "driver"):
        table.add_column(col)
    for i in infos:
        table.add_row(
            str(i.index), i.name, f"{i.cc[0]}.{i.cc[1]}", str(i.sm_count), f"{i.memory_bytes / 2**30:.1f} GiB",
            f"{i.sm_clock_mhz:.0f} MHz" if i.sm_clock_mhz else "n/a",
            f"{i.memory_clock_mhz:.0f} MHz" if i.memory_clock_mhz else "n/a",
            f"{i.l2_bytes / 2**20:.0f} MiB",
            f"{i.peak_fp32_gflops / 1e3:.1f} TFLOP/s" if i.peak_fp32_gflops else "n/a",
            f"{i.peak_bandwidth_gbs:.0f} GB/s" if i.peak_bandwidth_gbs else "n/a",
            f"{i.driver_version} (runtime {i.runtime_version})",
        )  # fmt: skip
    console.print(table)


@app.command()
@friendly
def kernels(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The kernel catalogue."""
    rows = [
        {
            "id": s.id,
            "source_doc": s.source_doc,
            "summary": s.summary,
            "source": s.source,
            "block_edges": list(s.block_edges),
            "dtypes": list(s.dtypes),
            "constraints": s.needs,
        }
        for s in catalogue.CATALOGUE
    ]
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"{len(rows)} kernels")
    for col in ("id", "what it does", "from", "block edges", "dtypes", "needs"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["id"], r["summary"], r["source_doc"], " ".join(map(str, r["block_edges"])) or "-",
                      " ".join(r["dtypes"]), "; ".join(r["constraints"]) or "any size")  # fmt: skip
    console.print(table)


def _current_arch() -> str:
    from gemmlab import gpu

    return gpu.describe(0).arch


@app.command("compile")
@friendly
def compile_cmd(
    kernel_ids: Annotated[list[str] | None, typer.Argument(help="Kernels (default: all).")] = None,
    arch: Annotated[str | None, typer.Option(help="Target, e.g. sm_90a, sm_80 (default: this GPU).")] = None,
    block: Annotated[list[int] | None, typer.Option(help="Block edges (default: the catalogue's).")] = None,
    dtype: Annotated[str | None, typer.Option(help="Data type (default: the kernel's first).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compile kernels with NVRTC and show registers, shared memory, stack and spills. No GPU needed with --arch."""
    from gemmlab.compile import compile_kernel, normalise_arch

    target = normalise_arch(arch) if arch else _current_arch()
    specs = [catalogue.get(k) for k in kernel_ids] if kernel_ids else list(catalogue.CATALOGUE)
    rows = []
    for spec in specs:
        try:
            spec_arch = spec.compile_arch(target)
        except DeviceLimitError:
            if kernel_ids:
                raise
            continue  # all kernels: those that cannot target this architecture are left out
        kind = dtype or spec.dtypes[0]
        if kind not in spec.dtypes:
            raise GemmlabError(f"{spec.id} has no {kind} version.", f"It takes {', '.join(spec.dtypes)}.")
        edges = (block or list(spec.block_edges)) if spec.takes_block_edge else [0]
        for edge in edges:
            if spec.takes_block_edge and not 1 <= edge <= spec.max_edge:
                raise GemmlabError(f"Block edge {edge} is outside 1..{spec.max_edge}.", "Choose a smaller edge.")
            res = compile_kernel(spec, edge, kind, spec_arch).resources
            rows.append({"kernel": spec.id, "block_edge": edge, "dtype": kind, "arch": spec_arch,
                         "registers": res.registers, "smem_bytes": res.smem_bytes, "stack_bytes": res.stack_bytes,
                         "spill_bytes": res.spill_bytes, "barriers": res.barriers})  # fmt: skip
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"NVRTC, {target}")
    for col in ("kernel", "block edge", "dtype", "registers", "static smem [B]", "stack [B]", "spills [B]"):
        table.add_column(col, justify="right" if col not in ("kernel", "dtype") else "left")
    for r in rows:
        table.add_row(r["kernel"], str(r["block_edge"] or "-"), r["dtype"], str(r["registers"]),
                      str(r["smem_bytes"]), str(r["stack_bytes"]), str(r["spill_bytes"]))  # fmt: skip
    console.print(table)


@app.command()
@friendly
def run(
    kernel_id: KernelArg,
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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run one kernel: verify it against a float64 reference, time it, compare with cuBLAS.

    A kernel tuned on this GPU (`gemmlab tune`) runs with its stored configuration for the size's class.
    """
    from gemmlab.run import run as run_kernel

    # Every product needs K (matmul, the FP32 ladder, the tensor cores); the memory lab's kernels do not.
    needs_k = catalogue.get(kernel_id).problem.metric != "gbs"
    shape = parse_shape(size, m, n, k, needs_k)
    spec = None if no_tuned else stored_tuned_spec(kernel_id, shape, db, dtype)
    result = run_kernel(kernel_id, shape, block, dtype, reps=reps, flush_l2=flush_l2, seed=seed, spec=spec)
    config_source = ("tuned" if spec else "catalogue default") if result.config else None
    if as_json:
        emit_json({**result.to_dict(), "config_source": config_source})
        return
    console.print(result_table(result, config_source))
    for w in result.warnings:
        err_console.print(f"[yellow]warning:[/] {w}")


def result_table(r: Any, config_source: str | None = None) -> Table:
    t = r.timing
    table = Table(title=f"{r.kernel}  {r.shape}  block edge {r.block_edge or '-'}  {r.dtype}  on {r.device['name']}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    memory_bound = r.metric == "gbs"
    headline = ("GB/s (read + written)", f"{r.gbytes_per_s:,.1f}") if memory_bound else ("GFLOPS", f"{r.gflops:,.1f}")
    error = "exact" if r.error == 0 else f"{r.error:.2e}"
    rows = [
        ("time (median) [ms]", f"{t.median_ms:.4f}"),
        ("time min / max [ms]", f"{t.min_ms:.4f} / {t.max_ms:.4f}"),
        ("repetitions", str(t.reps)),
        headline,
        ("check against the reference", f"{error} (tolerance {r.tolerance:.0e})"),
        ("grid x block", f"{r.grid} x {r.block}"),
        ("registers / static smem", f"{r.resources.registers} / {r.resources.smem_bytes} B"),
    ]
    if r.config:
        rows.append((f"configuration ({config_source})" if config_source else "configuration", config_label(r.config)))
    if r.baseline_timing is not None:
        lib = r.baseline_gbytes_per_s if memory_bound else r.baseline_gflops
        rows += [(f"{r.baseline_name} {headline[0]}", f"{lib:,.1f}"),
                 ("ratio to library", f"{r.ratio_to_baseline:.1%}")]  # fmt: skip
    for row in rows:
        table.add_row(*row)
    return table


def _usage_errors() -> tuple[type[Exception], ...]:
    """Click's usage-error class: typer >= 0.2x carries its own copy of click."""
    found: list[type[Exception]] = []
    try:
        from typer._click.exceptions import UsageError as vendored

        found.append(vendored)
    except ImportError:
        pass
    try:
        from click import UsageError

        found.append(UsageError)
    except ImportError:
        pass
    return tuple(found)


def run_cli(args: list[str]) -> int:
    """Run the command line ``args`` and return its exit code. Click's own
    usage errors (an option that does not exist, `--size abc`) are printed as
    one line like every other error, instead of a framed panel; no arguments
    still show the help."""
    try:
        code = app(args, prog_name="gemmlab", standalone_mode=False)
    except _usage_errors() as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            sys.stdout.write(ctx.get_help() + "\n")
            return 0
        where = f"`{ctx.command_path} --help`" if ctx is not None else "`gemmlab --help`"
        message = exc.format_message().rstrip()
        if not message.endswith((".", "?", "!")):
            message += "."
        err_console.print(f"[bold red]error:[/] {escape(message)} See {where}.", soft_wrap=True)
        return 2
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted; results stored so far are kept.")
        return 130
    return code if isinstance(code, int) else 0


def main() -> None:
    """The `gemmlab` entry point."""
    sys.exit(run_cli(sys.argv[1:]))


# Feature commands register themselves on `app` (see gemmlab/commands/).
from gemmlab.commands import check as _check  # noqa: E402, F401
from gemmlab.commands import occupancy as _occupancy  # noqa: E402, F401
from gemmlab.commands import peak as _peak  # noqa: E402, F401
from gemmlab.commands import profile as _profile  # noqa: E402, F401
from gemmlab.commands import report as _report  # noqa: E402, F401
from gemmlab.commands import sweep as _sweep  # noqa: E402, F401
from gemmlab.commands import tune as _tune  # noqa: E402, F401
