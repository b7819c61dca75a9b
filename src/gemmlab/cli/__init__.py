"""The command line: a thin shell over gemmlab's Python API.

``app`` (cli/app.py) is the Typer application; each command is one module
beside it, registered by importing it here. This list is the registry of
commands."""

from gemmlab.cli import (  # noqa: F401  (each import registers its commands on app)
    check,
    compile,
    devices,
    kernels,
    occupancy,
    peak,
    profile,
    report,
    run,
    sweep,
    tune,
)
from gemmlab.cli.app import app, main, run_cli

__all__ = ["app", "main", "run_cli"]
