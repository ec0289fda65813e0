"""The one fence lexer: which parts of a model's response are code (docs/parser.md, "Fences").

Shared by the runner (``restrict/prep.py``, ``inline.py``), the fixed parser (``parser.py``) and the
CPython reference executor (``conformance/reference.py``), so what runs, where a block ends and
where a directive counts as code are decided in one place. The reference runs under interpreters
where rlm_compat is not importable and loads this file by path, so it uses the standard library
only and imports nothing of the package.

Two modes, both named here: :data:`MARKDOWN` (the default, :func:`scan_fences`) and
:data:`FIRST_FENCE_2FB46CC`, ysz/recursive-llm 2fb46cc's substring rule that profile ``upstream``
reproduces because its recorded fixtures pin it (:func:`first_fence_2fb46cc`).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from types import TracebackType

__all__ = [
    "FIRST_FENCE_2FB46CC",
    "MARKDOWN",
    "RUN_TAGS",
    "Fence",
    "describe_line",
    "extract_code",
    "fenced_blocks",
    "first_fence_2fb46cc",
    "line_map",
    "opens_fence",
    "scan_fences",
    "traceback_line",
]

MARKDOWN = "markdown"
FIRST_FENCE_2FB46CC = "2fb46cc-first-fence"

RUN_TAGS = frozenset({"", "python", "py", "python3", "py3", "repl"})
"""Fence tags whose body is run (``json``, ``text``... blocks are shown, not run)."""

_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)([^\n]*)")
_CLOSE = {"`": re.compile(r"[ \t]*(`+)[ \t]*(?:\n|\Z)"), "~": re.compile(r"[ \t]*(~+)[ \t]*(?:\n|\Z)")}


@dataclass(frozen=True)
class Fence:
    """One fenced block: character offsets into the scanned text.

    ``start`` is the opening line's start, ``body``..``body_end`` the body (up to the closing line's
    start), ``end`` the offset after the closing line (``len(text)`` when unclosed).
    """

    start: int
    body: int
    body_end: int
    end: int
    tag: str
    indent: bool
    closed: bool

    @property
    def runnable(self) -> bool:
        """Whether the runner runs this block (its tag is in :data:`RUN_TAGS`)."""
        return self.tag in RUN_TAGS


def opens_fence(text: str, line: int) -> tuple[str, int, str] | None:
    """``(fence character, run length, tag)`` when the line starting at ``line`` opens a fence.

    Any indentation; three or more backticks or tildes; the tag is the info string's first word,
    lowercased. A line with a backtick anywhere after the run (an inline span written with three
    backticks, or a tilde run followed by a backtick) is prose.
    """
    found = _OPEN.match(text, line)
    if found is None:
        return None
    run, tag, rest = found.group(1), found.group(2), found.group(3)
    if found.end() < len(text) and text[found.end()] != "\n":
        return None
    if "`" in rest:
        return None
    return run[0], len(run), tag.lower()


def _closes(text: str, line: int, char: str, length: int) -> int | None:
    """Offset after the closing line when the line at ``line`` closes a fence, else None."""
    found = _CLOSE[char].match(text, line)
    if found is None or len(found.group(1)) < length:
        return None
    return found.end()


def _next_line(text: str, index: int) -> int:
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def _block_end(text: str, body: int, char: str, length: int) -> tuple[int, int, bool]:
    """``(body end, block end, closed)``: the first closing line after ``body``, whatever the body
    holds (a fence line inside a Python string closes the block too, as Markdown renders it)."""
    line = body
    while line < len(text):
        after = _closes(text, line, char, length)
        if after is not None:
            return line, after, True
        line = _next_line(text, line)
    return len(text), len(text), False


def scan_fences(text: str) -> list[Fence]:
    """Every fenced block of ``text``, in order (mode :data:`MARKDOWN`).

    A block opens at any line :func:`opens_fence` accepts and closes at the first line holding only
    a run of the same character at least as long (blanks around allowed); unclosed, it runs to the
    end of the text. Lines end at ``\\n`` only: a ``\\r`` is an ordinary character here, so a
    ``\\r\\n`` fence line opens but never closes (the recorded reference pins this).
    """
    fences: list[Fence] = []
    line = 0
    while line < len(text):
        opened = opens_fence(text, line)
        if opened is None:
            line = _next_line(text, line)
            continue
        char, length, tag = opened
        body = _next_line(text, line)
        body_end, end, closed = _block_end(text, body, char, length)
        indent = text[line] in " \t"
        fences.append(Fence(line, body, body_end, end, tag, indent, closed))
        if end <= line:
            break
        line = end
    return fences


def block_text(text: str, fence: Fence) -> str:
    """The body the runner runs: without the final newline before the close, dedented when the
    fence was indented."""
    body = text[fence.body : fence.body_end]
    if fence.closed and body.endswith("\n"):
        body = body[:-1]
    return textwrap.dedent(body) if fence.indent else body


def fenced_blocks(text: str) -> list[str] | None:
    """Runnable fenced blocks in order; None when the text has no fence line at all."""
    fences = scan_fences(text)
    if not fences:
        return None
    return [block_text(text, fence) for fence in fences if fence.runnable]


def first_fence_2fb46cc(text: str) -> str:
    """Mode :data:`FIRST_FENCE_2FB46CC`: the first block opened by three backticks and ``python``,
    else the first fence of any kind with its tag left in the code, else the whole text; found by
    substring, so three backticks inside a line count too, and the body is stripped."""
    tagged = "```python"
    if tagged in text:
        start = text.find(tagged) + len(tagged)
        end = text.find("```", start)
        if end != -1:
            return text[start:end].strip()
    if "```" in text:
        start = text.find("```") + 3
        end = text.find("```", start)
        if end != -1:
            return text[start:end].strip()
    return text


def extract_code(text: str, mode: str = MARKDOWN) -> tuple[str, tuple[tuple[int, int], ...], int]:
    """The code the runner runs, per code line ``(block, line in block)``, and the block count.

    :data:`MARKDOWN`: every runnable block joined in order; with no fence line, the whole text.
    :data:`FIRST_FENCE_2FB46CC`: :func:`first_fence_2fb46cc`, one block.
    """
    if mode == FIRST_FENCE_2FB46CC:
        code = first_fence_2fb46cc(text)
        return code, line_map([code]), 1
    if mode != MARKDOWN:
        raise ValueError(f"unknown fence mode {mode!r}")
    blocks = fenced_blocks(text)
    if blocks is None:
        return text, line_map([text]), 1
    return "\n".join(blocks), line_map(blocks), len(blocks)


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
