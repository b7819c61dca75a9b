"""The command line: a thin shell over gemmlab's Python API.

``app`` (cli/app.py) is the Typer application; each command is one module
beside it, registered on ``app`` when imported here. This list is the
registry of commands, in the order `gemmlab --help` shows them."""

# isort: off
from gemmlab.cli import doctor, devices, kernels, compile, run  # noqa: F401  (the core commands)
from gemmlab.cli import check, stress, occupancy, peak, profile, report, export, sweep, tune, grade, dispatch  # noqa: F401  (one per feature)
from gemmlab.cli import distributed  # noqa: F401  (the multi-GPU ladder)

# isort: on
from gemmlab.cli.app import app, main, run_cli

__all__ = ["app", "main", "run_cli"]
