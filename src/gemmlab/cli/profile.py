"""`gemmlab profile`: one verified launch under Nsight Compute, counters beside the models."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from gemmlab.api.profile import DEFAULT_TIMEOUT_S, ProfileResult, generic_figures, profile
from gemmlab.cli.app import (
    BlockOpt,
    DtypeOpt,
    KernelArg,
    KOpt,
    MOpt,
    NOpt,
    SizeOpt,
    app,
    console,
    emit_json,
    friendly,
    parse_shape,
)


@app.command("profile")
@friendly
def profile_cmd(
    kernel_id: KernelArg,
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    block: BlockOpt = None,
    dtype: DtypeOpt = None,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds Nsight Compute may take.")] = DEFAULT_TIMEOUT_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Profile one launch with Nsight Compute: GIPS, FLOPs executed, CGMA, occupancy, memory traffic.

    FLOPs executed counts the CUDA cores' fadd, fmul and ffma (an ffma as two) and, for a kernel that uses the
    tensor cores, their operations (two per multiply-add), also shown apart with the tensor pipe's busy share.
    """
    result = profile(kernel_id, parse_shape(size, m, n, k), block, dtype, timeout=timeout)
    if as_json:
        emit_json(result.to_dict())
        return
    console.print(profile_table(result))


def _fmt(value: float | None, spec: str = ",.0f", suffix: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{suffix}"


def _excess(wavefronts: float | None, requests: float | None) -> str:
    """Shared-memory wavefronts beyond one per request: serialisation from bank conflicts or
    wide (64/128-bit) accesses. ncu's bank-conflict counter also counts stalls from other L1
    traffic, so the two views are shown side by side."""
    return "n/a" if wavefronts is None or requests is None else f"{wavefronts - requests:,.0f}"


def _tensor_rows(r: ProfileResult) -> list[tuple[str, str, str, str]]:
    """The tensor cores' share, for a kernel that uses them (the figures are None or 0 otherwise)."""
    rows = []
    if r.tensor_flops:
        share = _fmt(r.tensor_flops / r.flops_measured * 100, ".1f")
        rows.append(("tensor-core FLOPs", _fmt(r.tensor_flops), f"{r.flops_model:,}",
                     f"{share}% of FLOPs executed; sm__ops_path_tensor_*, 2 per multiply-add"))  # fmt: skip
    if r.tensor_pipe_pct:
        rows.append(("tensor pipe busy [%]", _fmt(r.tensor_pipe_pct, ".1f"), "",
                     "sm__pipe_tensor_cycles_active, % of its peak over the elapsed cycles"))  # fmt: skip
    return rows


def profile_rows(r: ProfileResult) -> list[tuple[str, str, str, str]]:
    """(figure, measured by ncu, model or expectation, note) for every row of the table."""
    integer = r.dtype == "int32"
    ops = "integer instructions" if integer else "FLOPs executed"
    model_intensity = r.flops_model / r.min_bytes_model if r.min_bytes_model else None
    limits = " · ".join(f"{name} {_fmt(v)}" for name, v in r.occupancy_limits.items())
    smem = _fmt(r.smem_per_block, ",.0f", " B")
    return [
        ("time [ms]", _fmt(r.time_ms, ".4f"), "", "gpu__time_duration; clocks left as they are"),
        ("GFLOPS", _fmt(r.gflops, ",.1f"), "", "2·M·N·K / time"),
        ("instructions executed (warp level)", _fmt(r.inst_executed), "", ""),
        ("GIPS", _fmt(r.gips, ",.1f"), "", "warp instructions / time / 1e9"),
        (ops, _fmt(r.flops_measured), f"{r.flops_model:,}", f"{_fmt(r.flops_ratio, '.3f')} x the 2·M·N·K model"
         + ("; counts index arithmetic too" if integer else "")),
        *_tensor_rows(r),
        ("CGMA [FLOP per global access]", _fmt(r.cgma_measured, ",.2f"), _fmt(r.cgma_analytic, ",.2f"),
         "measured: per warp request (ld + st); model: per thread load (catalogue)"),
        ("global loads: requests / sectors", f"{_fmt(r.global_ld_requests)} / {_fmt(r.global_ld_sectors)}", "",
         f"{_fmt(r.ld_sectors_per_request, '.2f')} sectors per request"),
        ("global stores: requests / sectors", f"{_fmt(r.global_st_requests)} / {_fmt(r.global_st_sectors)}", "",
         f"{_fmt(r.st_sectors_per_request, '.2f')} sectors per request"),
        ("DRAM read / written [MB]", f"{r.dram_bytes_read / 1e6:,.3f} / {r.dram_bytes_written / 1e6:,.3f}",
         f"{r.min_bytes_model / 1e6:,.3f} in all", "model: each input read once, the output written once"),
        ("DRAM bandwidth [GB/s]", _fmt(r.dram_gbs, ",.1f"), "", f"{_fmt(r.dram_throughput_pct, '.1f')}% of peak"),
        ("arithmetic intensity [FLOP/byte]", _fmt(r.arithmetic_intensity, ",.2f"), _fmt(model_intensity, ",.2f"),
         "2·M·N·K over DRAM bytes"),
        ("SM throughput [% of peak]", _fmt(r.sm_throughput_pct, ".1f"), "", ""),
        ("occupancy [%]", _fmt(r.achieved_occupancy, ".1f"), _fmt(r.theoretical_occupancy, ".1f"),
         "achieved / theoretical"),
        ("blocks per SM allowed by", limits, "", "limited by " + (", ".join(r.limiting_factors) or "n/a")),
        ("registers per thread / smem per block", f"{_fmt(r.registers_per_thread)} / {smem}", "", ""),
        ("shared loads / stores (warp requests)", f"{_fmt(r.shared_ld_requests)} / {_fmt(r.shared_st_requests)}", "",
         f"wavefronts {_fmt(r.shared_ld_wavefronts)} / {_fmt(r.shared_st_wavefronts)}"),
        ("shared bank conflicts ld / st", f"{_fmt(r.bank_conflicts_ld)} / {_fmt(r.bank_conflicts_st)}", "",
         f"wavefronts beyond one per request: {_excess(r.shared_ld_wavefronts, r.shared_ld_requests)} / "
         f"{_excess(r.shared_st_wavefronts, r.shared_st_requests)}"),
        *_generic_rows(r),
    ]  # fmt: skip


def _generic_rows(r: ProfileResult) -> list[tuple[str, str, str, str]]:
    """A row for each figure without one written above: its label, unit and counters as the registry has them."""
    return [
        (f"{f.label} [{f.unit}]" if f.unit else f.label, _fmt(r.figures[f.key], f.number_format), "",
         ", ".join((*f.counters, *f.tensor_counters)))
        for f in generic_figures()
    ]  # fmt: skip


def profile_table(r: ProfileResult) -> Table:
    where = f" on {r.device}" if r.device else ""
    cc = f" (CC {r.cc})" if r.cc else ""
    edge = r.block_edge or "-"
    table = Table(title=f"{r.kernel}  {r.shape}  block edge {edge}  {r.dtype}{where}{cc}, Nsight Compute")
    table.add_column("figure")
    table.add_column("measured", justify="right")
    table.add_column("model", justify="right")
    table.add_column("note", style="dim")
    for row in profile_rows(r):
        table.add_row(*(escape(cell) for cell in row))  # '[ms]' is text, not a style
    return table
