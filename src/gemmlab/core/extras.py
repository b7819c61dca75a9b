"""Optional dependencies: imported when a feature needs them, with an error
that names the extra to install when one is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from gemmlab.core.errors import GemmlabError


class MissingExtra(GemmlabError):
    """An optional dependency that a feature needs is not installed."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """``module`` imported, or MissingExtra naming ``extra`` (pyproject's optional
    dependencies) for ``purpose`` ("results as a DataFrame", say)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(
            f"{purpose} needs {module.split('.')[0]}, which is not installed ({exc}).",
            f"Install it with `pip install 'gemmlab[{extra}]'`.",
        ) from None
