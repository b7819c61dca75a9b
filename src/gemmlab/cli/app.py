"""The command line's shell: the Typer app, its consoles, the error wrapper
and the entry point. Each command is a module of its own beside this one."""

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

from gemmlab.core.errors import GemmlabError
from gemmlab.core.shapes import Shape

app = typer.Typer(
    no_args_is_help=True,
    help="gemmlab: run, verify, time and explain GPU matrix-multiplication kernels.",
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)
# The results database, as every command that stores or reads results takes it.
DbOption = Annotated[Path, typer.Option("--db", help="Results database (SQLite), created on first use.")]


def _print_version(asked: bool) -> None:
    if asked:
        from gemmlab.api.doctor import versions

        sys.stdout.write(versions() + "\n")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the versions and exit."),
    ] = False,
) -> None:
    """gemmlab: run, verify, time and explain GPU matrix-multiplication kernels."""


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
# A command that takes a user's kernel as well (docs/user-kernels.md).
KernelOrFileArg = Annotated[
    str,
    typer.Argument(
        help="A catalogue id (see `gemmlab kernels`), or your kernel's declaration (.toml, or the .cu beside it)."
    ),
]
SizeOpt = Annotated[int | None, typer.Option(help="Square size N (M = N = K).")]
MOpt = Annotated[int | None, typer.Option("--m", help="Rows of A and C.")]
NOpt = Annotated[int | None, typer.Option("--n", help="Columns of B and C.")]
KOpt = Annotated[int | None, typer.Option("--k", help="Columns of A, rows of B.")]
BlockOpt = Annotated[int | None, typer.Option(help="Block edge (default: the kernel's largest documented).")]
DtypeOpt = Annotated[str | None, typer.Option(help="float32, int32, ... (default: the kernel's first).")]


def _usage_errors() -> tuple[type[Any], ...]:
    """Click's usage-error class: typer >= 0.2x carries its own copy of click.
    (Typed Any: the two classes share no base that has their format_message.)"""
    found: list[type[Any]] = []
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
