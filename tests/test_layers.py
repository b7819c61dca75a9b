"""The package's folders are its layers, and imports go one way: a module may
import from its own layer and the layers below it, never from one above.
docs/architecture.md draws the same order."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "gemmlab"
# Lowest first. problems/ sits below kernels/: a KernelSpec names the problem
# it solves, and a problem needs nothing of the kernels but their shape and
# dtype (it names the Point type for annotations only).
LAYERS = ("core", "problems", "kernels", "backends", "measure", "store", "studies", "report", "api", "cli")


def _imported_layers(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, layer) of every gemmlab import outside ``if TYPE_CHECKING:`` blocks."""
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "gemmlab":
            parts = node.module.split(".")
            names = [parts[1]] if len(parts) > 1 else [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] for a in node.names if a.name.startswith("gemmlab.")]
        else:
            continue
        found += [(node.lineno, name) for name in names if name in LAYERS]
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE)


def test_every_module_lives_in_a_layer() -> None:
    top = {p.relative_to(PACKAGE).parts[0] for p in _modules()}
    assert top == set(LAYERS)
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "__main__.py"}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_the_layers(path: Path) -> None:
    mine = LAYERS.index(path.relative_to(PACKAGE).parts[0])
    upward = [
        f"line {line}: imports {layer}"
        for line, layer in _imported_layers(ast.parse(path.read_text()))
        if LAYERS.index(layer) > mine
    ]
    assert not upward, f"{path.relative_to(PACKAGE)} reaches up the layers: {'; '.join(upward)}"


def test_the_check_sees_an_upward_import() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "from gemmlab.store.store import Store\n"
        "if TYPE_CHECKING:\n    from gemmlab.cli.app import app\n"
        "def f():\n    from gemmlab import report\n"
    )
    assert _imported_layers(tree) == [(2, "store"), (6, "report")]


@pytest.mark.parametrize("path", sorted((PACKAGE / "cli").glob("*.py")), ids=lambda p: p.name)
def test_the_command_line_goes_through_the_api(path: Path) -> None:
    """Issue 51: one front door. A command parses and prints; what runs, and
    with which configuration, is the API's to decide, the same for a notebook
    and the terminal. So the command line imports the API and core (errors,
    shapes: the vocabulary both speak), nothing between them."""
    between = [
        f"line {line}: imports {layer}"
        for line, layer in _imported_layers(ast.parse(path.read_text()))
        if layer not in ("core", "api", "cli")
    ]
    assert between == [], f"{path.name} reaches below the API: {between}"
