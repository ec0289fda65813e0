"""From a model's response to restricted bytecode: the pipeline, its refusals and its cache.

Steps, each driven by :class:`~.transformer.CompileOptions` (derived from the Profile once):

1. :func:`extract` picks the code out of the response (every runnable fence in order, or
   2fb46cc's first-fence rule) and remembers where each line came from.
2. :class:`~.transformer.SandboxTransformer` is RestrictedPython's transformer with the switches
   applied: it refuses ``_`` names, ``exec``/``eval`` and unknown syntax, and rewrites attribute
   access, writes and ``print`` into guard calls.
3. :func:`~.rewrites.finish_tree` adds what must come after the policy check: the display of the
   last expression, a deadline tick at the top of every ``except`` body, and size guards on
   ``**`` / ``<<`` / risky ``*``.

Compiled programs are cached by (source, options)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
import threading
from collections import OrderedDict
from types import CodeType
from typing import Any

from ...fences import FIRST_FENCE_2FB46CC, MARKDOWN, describe_line, extract_code, traceback_line
from .rewrites import RenameGuards, SizeGuards, finish_tree
from .transformer import CompileIssue, CompileOptions, SandboxTransformer
from .warnguard import quiet_compile

__all__ = ["Compiled", "Program", "compile_program", "extract", "user_line"]


@functools.cache
def _rp9() -> bool:
    """RestrictedPython 9 words a null-byte error differently (asked late: importlib.metadata is slow)."""

    from importlib import metadata

    return int(metadata.version("RestrictedPython").split(".")[0]) >= 9


_TRAILING_KEYWORDS = ("=", "import", "def", "class", "if", "for", "while", "with")


# --- 1. extraction ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Program:
    """The code to run and, per program line, ``(block number, line in block)`` (1-based)."""

    source: str
    line_map: tuple[tuple[int, int], ...]
    blocks: int


def extract(text: str, first_fence_only: bool) -> Program:
    """The code in a response: :func:`..fences.extract_code` in 2fb46cc's first-fence mode or the
    Markdown mode (the one fence lexer decides both)."""
    source, lines, blocks = extract_code(text, FIRST_FENCE_2FB46CC if first_fence_only else MARKDOWN)
    return Program(source, lines, blocks)


# --- compile + cache ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A compiled program, or the reasons it was refused."""

    code: CodeType | None
    trailing: CodeType | None
    issues: tuple[CompileIssue, ...]
    filename: str


_SYNTAX_TEMPLATE = "Line {lineno}: {type}: {msg} at statement: {statement!r}"

_cache: OrderedDict[tuple[str, CompileOptions], Compiled] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 512
_serial = itertools.count(1)


def compile_program(source: str, opts: CompileOptions) -> Compiled:
    """Compile ``source`` under ``opts`` (cached)."""
    key = (source, opts)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    compiled = _compile(source, opts)
    with _cache_lock:
        _cache[key] = compiled
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def _compile(source: str, opts: CompileOptions) -> Compiled:
    with quiet_compile():  # SyntaxWarnings about the model's code are not the host's
        return _compile_quietly(source, opts)


def _compile_quietly(source: str, opts: CompileOptions) -> Compiled:
    filename = f"<rlm-repl-{next(_serial)}>"
    try:
        tree = ast.parse(source, filename, "exec")
    except (SyntaxError, ValueError) as exc:
        return Compiled(None, None, (_syntax_issue(exc),), filename)
    transformer = SandboxTransformer(opts)
    transformer.visit(tree)
    if transformer.issues:
        return Compiled(None, None, tuple(transformer.issues), filename)
    tree = finish_tree(tree, opts, source)
    try:
        code = compile(tree, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:  # e.g. 'break' outside loop
        return Compiled(None, None, (_late_syntax_issue(exc),), filename)
    trailing = _trailing_code(source, opts, filename) if opts.trailing_line_heuristic else None
    return Compiled(code, trailing, (), filename)


def _syntax_issue(exc: SyntaxError | ValueError) -> CompileIssue:
    if isinstance(exc, SyntaxError):
        text = _SYNTAX_TEMPLATE.format(
            lineno=exc.lineno,
            type=type(exc).__name__,
            msg=exc.msg,
            statement=exc.text.strip() if exc.text else None,
        )
        return CompileIssue("syntax", exc.lineno, f"{type(exc).__name__}: {exc.msg}", text)
    # RestrictedPython 9 formats a ValueError (null byte) like a syntax error; 8.x gives its text.
    upstream = f"Line None: ValueError: {exc}" if _rp9() else str(exc)
    return CompileIssue("syntax", None, f"ValueError: {exc}", upstream)


def _late_syntax_issue(exc: SyntaxError | ValueError) -> CompileIssue:
    """A SyntaxError only CPython's compiler finds, after RestrictedPython accepted the tree.

    2fb46cc does not wrap these in "Compilation error": the exception's own text is used, with
    RestrictedPython's default filename.
    """
    issue = _syntax_issue(exc)
    upstream = str(exc)
    if isinstance(exc, SyntaxError):
        upstream = f"{exc.msg} (<string>, line {exc.lineno})"
    return dataclasses.replace(issue, kind="late-syntax", upstream_text=upstream)


def _trailing_code(source: str, opts: CompileOptions, filename: str) -> CodeType | None:
    """2fb46cc's second evaluation of the last line, compiled restricted (never a plain eval).

    Its rule, reproduced: the last line of the stripped code, when none of ``= import def class
    if for while with`` occurs in it as a substring, is evaluated again as an expression and
    shown; anything failing is silently skipped.
    """
    last = source.strip().split("\n")[-1].strip()
    if not last or any(k in last for k in _TRAILING_KEYWORDS):
        return None
    try:
        tree = ast.parse(last, filename, "eval")
    except (SyntaxError, ValueError):
        return None
    if any(isinstance(n, ast.Name) and n.id in ("print", "printed") for n in ast.walk(tree)):
        return None  # a plain eval could not resolve these names either
    transformer = SandboxTransformer(opts)
    transformer.visit(tree)
    if transformer.issues:
        return None
    tree = RenameGuards().visit(SizeGuards().visit(tree))
    try:
        return compile(ast.fix_missing_locations(tree), filename, "eval", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


def user_line(tb: Any, filename: str, lines: tuple[tuple[int, int], ...], blocks: int) -> str:
    """Where in the user's code a traceback last passed through this program ('' if nowhere)."""
    return describe_line(traceback_line(tb, filename), lines, blocks)
