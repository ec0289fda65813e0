"""Fenced code in a model's response, and where an error's line sits in it (docs/repl.md).

The one implementation of the fence rules and the ``line N of code block M`` wording, shared by
the sandbox (``prep.py``, ``inline.py``) and the CPython reference executor
(``conformance/reference.py``). The reference runs under interpreters where rlm_compat is not
importable and loads this file by path, so it uses the standard library only and imports nothing
of the package.
"""

from __future__ import annotations

import re
import textwrap
from types import TracebackType

__all__ = ["RUN_TAGS", "describe_line", "fenced_blocks", "line_map", "traceback_line"]

RUN_TAGS = frozenset({"", "python", "py", "python3", "py3", "repl"})
"""Fence tags whose body is run (``json``, ``text``... blocks are shown, not run)."""
_OPEN = re.compile(r"^([ \t]{0,3})(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*$")


def fenced_blocks(text: str) -> list[str] | None:
    """Runnable fenced blocks in order; None when the text has no fence line at all."""
    lines = text.split("\n")
    blocks: list[str] = []
    seen_fence = False
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        seen_fence = True
        indent, marker, tag = m.group(1), m.group(2), m.group(3).lower()
        close = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        if tag in RUN_TAGS:
            block = "\n".join(body)
            blocks.append(textwrap.dedent(block) if indent else block)
    return blocks if seen_fence else None


def line_map(blocks: list[str]) -> tuple[tuple[int, int], ...]:
    """Per line of the joined blocks, ``(block number, line in block)`` (both 1-based)."""
    return tuple(
        (number, i) for number, block in enumerate(blocks, 1) for i in range(1, block.count("\n") + 2)
    )


def traceback_line(tb: TracebackType | None, filename: str) -> int | None:
    """The last line of ``filename`` a traceback passed through (None if it never did)."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def describe_line(line: int | None, lines: tuple[tuple[int, int], ...], blocks: int) -> str:
    """``line 3`` (or ``line 3 of code block 2`` when the response had several blocks)."""
    if line is None:
        return ""
    if lines and 0 < line <= len(lines):
        block, in_block = lines[line - 1]
        return f"line {in_block}" if blocks == 1 else f"line {in_block} of code block {block}"
    return f"line {line}"
