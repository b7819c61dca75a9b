"""What a user's ``.cu`` file says of its kernel, read from its text: the
declared ``__global__`` function's template and arguments, its ``#define``
lines (set in the text handed to NVRTC, one line for one line), and whether
it names a parameter some other way."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gemmlab.core.errors import DeclarationError


def define_pattern(name: str) -> re.Pattern:
    # An object-like macro only: `#define TILE 16`, not `#define TILE(x) ...`.
    return re.compile(rf"^([ \t]*#[ \t]*define[ \t]+{re.escape(name)})(?![\w(])(.*)$", re.MULTILINE)


def set_define(text: str, name: str, value: int) -> str:
    """``text`` with every ``#define name ...`` line saying ``value``; one line
    for one line, so NVRTC's line numbers stay those of the user's file."""
    return define_pattern(name).sub(lambda m: f"{m.group(1)} {value}", text)


def without_comments(text: str) -> str:
    """``text`` with comments blanked (their newlines kept), to look for declarations in."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.DOTALL)


@dataclass(frozen=True)
class GlobalFunction:
    """What the file says about the declared ``__global__`` function."""

    template: tuple[tuple[str, str], ...]  # (kind, name): kind "type" or "value"
    parameters: tuple[str, ...]  # each parameter's declaration text


def find_function(text: str, name: str, where: str) -> GlobalFunction:
    code = without_comments(text)
    found = {}
    for match in re.finditer(r"__global__\b", code):
        paren = code.find("(", match.end())
        head = code[match.end() : paren]
        ident = re.findall(r"\w+", head)
        if ident:
            found[ident[-1]] = (match.start(), paren)
    if name not in found:
        listed = ", ".join(found) or "none"
        raise DeclarationError(
            f"{where}: the file has no __global__ function '{name}' (its __global__ functions: {listed}).",
            "Set `function` to the name of the kernel in the file.",
        )
    start, paren = found[name]
    template: tuple[tuple[str, str], ...] = ()
    before = re.search(r"template\s*<([^<>]*)>\s*$", code[:start])
    if before:
        params = []
        for part in filter(None, (p.strip() for p in before.group(1).split(","))):
            declared = part.split("=")[0].split()
            kind = "type" if declared[0] in ("typename", "class") else "value"
            params.append((kind, declared[-1]))
        template = tuple(params)
    depth, end = 0, paren
    for end in range(paren, len(code)):
        depth += {"(": 1, ")": -1}.get(code[end], 0)
        if depth == 0:
            break
    inside = code[paren + 1 : end].strip()
    parameters = tuple(p.strip() for p in _top_level_split(inside)) if inside and inside != "void" else ()
    return GlobalFunction(template, parameters)


def _top_level_split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def line_naming(code: str, name: str) -> str | None:
    """The first line of ``code`` (comments blanked) that names ``name`` outside a
    string literal and a ``#line`` directive, stripped; None when none does."""
    word = re.compile(rf"\b{re.escape(name)}\b")
    for line in code.splitlines():
        if not re.match(r"\s*#\s*line\b", line) and word.search(re.sub(r'"(?:\\.|[^"\\])*"', '""', line)):
            return line.strip()
    return None
