"""`gemmlab compile`: NVRTC, and what ptxas reports."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from gemmlab.cli import batch
from gemmlab.cli.app import app, console, emit_json, friendly
from gemmlab.cli.choices import chosen_target, gpu_kernel, kernel_arch, refuse_block
from gemmlab.core.errors import ConstraintError, DeviceLimitError
from gemmlab.kernels import catalogue
from gemmlab.kernels.spec import KernelSpec


@app.command("compile")
@friendly
def compile_cmd(
    kernel_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Catalogue ids or your kernels' declarations (.toml, or the .cu beside one); default: all."
        ),
    ] = None,
    arch: Annotated[
        str | None, typer.Option(help="Target, e.g. sm_90a, sm_80 (default: this GPU's, or sm_90 without a GPU).")
    ] = None,
    block: Annotated[list[int] | None, typer.Option(help="Block edges (default: the catalogue's).")] = None,
    dtype: Annotated[str | None, typer.Option(help="Data type (default: the kernel's first).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Compile kernels with NVRTC and show registers, shared memory, stack and spills. No GPU needed.

    Each kernel named gets a status; one that fails does not stop the others. With no kernel named, every
    catalogue kernel that NVRTC can compile for the target is compiled, and one line names those left out.
    """
    target, note = chosen_target(arch)
    names, left_out = (kernel_ids, "") if kernel_ids else catalogue_for(target, block, dtype)
    if not names:
        raise ConstraintError(f"No catalogue kernel compiles for {target} with these options.", left_out)
    statuses = batch.each(names, lambda name: _compiled_rows(name, target, block, dtype))
    rows = [row for status in statuses if status.ok for row in status.value]
    # No rows when every kernel failed: then their errors alone.
    if rows and as_json:
        emit_json(rows)
    elif rows:
        console.print(_table(target, rows))
    batch.finish(statuses, [line for line in (left_out, note) if line])


def _compiled_rows(name: str, target: str, block: list[int] | None, dtype: str | None) -> list[dict]:
    """One row per block edge of the kernel ``name`` compiled for ``target``."""
    from gemmlab.backends.nvrtc import compile_kernel
    from gemmlab.measure.kernel_occupancy import occupancy_edges

    spec = gpu_kernel(name, "compile")
    _refuse_other_compilers(spec)
    refuse_block(spec, block)
    spec_arch = kernel_arch(spec, target)
    kind = dtype or spec.dtypes[0]
    if kind not in spec.dtypes:
        raise ConstraintError(f"{spec.id} has no {kind} version.", f"It takes {', '.join(spec.dtypes)}.")
    rows = []
    for edge in occupancy_edges(spec, block):
        res = compile_kernel(spec, edge, kind, spec_arch).resources
        rows.append({"kernel": spec.id, "block_edge": edge, "dtype": kind, "arch": spec_arch,
                     "registers": res.registers, "smem_bytes": res.smem_bytes, "stack_bytes": res.stack_bytes,
                     "spill_bytes": res.spill_bytes, "barriers": res.barriers})  # fmt: skip
    return rows


def _refuse_other_compilers(spec: KernelSpec) -> None:
    from gemmlab.backends import NVRTC
    from gemmlab.backends.python import no_ahead_of_time

    if spec.backend != NVRTC:
        raise no_ahead_of_time(spec, "compile")


def catalogue_for(target: str, block: list[int] | None, dtype: str | None) -> tuple[list[str], str]:
    """Every catalogue kernel (candidate rungs and peer rungs included) that
    NVRTC can compile for ``target`` with these options, and one line that
    names the others, grouped by why ("" when none is left out)."""
    kept: list[str] = []
    left_out: dict[str, list[str]] = {}
    every = [*catalogue.kernel_ids(), *catalogue.candidate_ids(), *catalogue.peer_ids()]
    for kernel_id in every:
        reason = _why_left_out(catalogue.get(kernel_id), target, block, dtype)
        if reason:
            left_out.setdefault(reason, []).append(kernel_id)
        else:
            kept.append(kernel_id)
    if not left_out:
        return kept, ""
    groups = "; ".join(f"{', '.join(ids)} ({reason})" for reason, ids in left_out.items())
    return kept, f"Left out {len(every) - len(kept)} of {len(every)} catalogue kernels: {groups}."


def _why_left_out(spec: KernelSpec, target: str, block: list[int] | None, dtype: str | None) -> str:
    from gemmlab.backends import NVRTC
    from gemmlab.kernels.peers.spec import MODELS, PeerSpec

    if isinstance(spec, PeerSpec):
        return f"{MODELS[spec.model].name} rungs, built by their own compiler at their first run, not by NVRTC"
    if spec.backend != NVRTC:
        return "not CUDA C++"
    try:
        kernel_arch(spec, target)
    except DeviceLimitError:
        if spec.archs:
            return f"{' or '.join(spec.archs)} only"
        return f"compute capability {spec.min_cc[0]}.{spec.min_cc[1]} or newer"
    if dtype and dtype not in spec.dtypes:
        return f"no {dtype} version"
    if block and not spec.takes_block_edge:
        return "no block edge for --block to choose"
    return ""


def _table(target: str, rows: list[dict]) -> Table:
    table = Table(title=f"NVRTC, {target}")
    # A narrow terminal folds a long kernel name onto a second line and never cuts a name or a figure.
    # The headers are short enough that 80 columns hold the table with room for the name.
    table.add_column("kernel", overflow="fold")
    for col in ("edge", "dtype", "registers", "smem [B]", "stack [B]", "spills [B]"):
        table.add_column(col, justify="left" if col == "dtype" else "right", overflow="fold")
    for r in rows:
        table.add_row(r["kernel"], str(r["block_edge"] or "-"), r["dtype"], str(r["registers"]),
                      str(r["smem_bytes"]), str(r["stack_bytes"]), str(r["spill_bytes"]))  # fmt: skip
    return table
