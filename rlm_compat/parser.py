"""Ending a run: FINAL("...") / FINAL_VAR(name).

Two parsers live here. The module-level ``extract_final``, ``extract_final_var``, ``is_final`` and
``parse_response`` reproduce ysz/recursive-llm 2fb46cc on every input, quirks included, because
drop-in users call ``rlm.parser`` directly and benchmarks scored with it must not move.

The fixed parser (:func:`resolve_final`, used by profile ``fixed`` after the response's code ran)
follows Python's own rules instead: a directive is a statement, its argument is read by ``ast``, and
a run ends only when the model clearly meant it to (docs/parser.md has the table):

* Runnable fenced blocks are code; which blocks those are and where each ends is the one fence
  lexer's decision (:mod:`rlm_compat.fences`, shared with the runner). In a block a
  directive counts when it is the first token of a logical line, no deeper indented than the
  block's first line (so ``if ok: FINAL(x)`` and function bodies, which may not have run, never end
  a run). Strings and comments are ignored. A shown block (``json``, ``text``...) is not read.
* Outside fences a directive counts only when it starts a line at column 0 (``use FINAL("answer")``
  in a sentence, `` `FINAL(x)` `` and indented lines are examples); the next fence ends its argument.
* The first complete directive decides: an answer, or feedback telling the model why it did not end
  the run. With none complete, the first unclosed one gets feedback.
* ``FINAL("text")`` answers the literal's value exactly; another literal ``str(value)``; ``FINAL(x)``
  and ``FINAL_VAR(x)`` / ``FINAL_VAR("x")`` answer ``str(env[x])``; anything else gets feedback.

Scanning is linear in the response length: one forward pass, regexes that never backtrack, and
``ast`` only for a closed directive whose argument is flat or short (deep ones crash 3.10's parser).
"""

from __future__ import annotations

import ast
import bisect
import keyword
import re
import types
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import FinalVarMissingError
from .fences import Fence, scan_fences

__all__ = [
    "Directive",
    "FinalResolution",
    "extract_final",
    "extract_final_var",
    "find_directive",
    "is_final",
    "is_final_fixed",
    "missing_variable_error",
    "parse_response",
    "resolve_final",
    "user_variables",
]

# --- upstream-exact (2fb46cc) ------------------------------------------------------------------

# Upstream's order matters: triple quotes first and greedy, then single-line quotes without escapes.
_UPSTREAM_FINAL_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(r"FINAL\s*\(\s*" + body, re.DOTALL)
    for body in ('"""(.*)"""', "'''(.*)'''", '"([^"]*)"', "'([^']*)'")
)
_UPSTREAM_FINAL_VAR = re.compile(r"FINAL_VAR\s*\(\s*(\w+)\s*\)")


def extract_final(response: str) -> str | None:
    """The stripped argument of the first matching ``FINAL(<quoted>)`` form, else None."""
    for pattern in _UPSTREAM_FINAL_PATTERNS:
        found = pattern.search(response)
        if found:
            return found.group(1).strip()
    return None


def extract_final_var(
    response: str, env: Mapping[str, Any], *, render: Callable[[str], str] | None = None
) -> str | None:
    """``str(env[name])`` for the first ``FINAL_VAR(name)``, or None when absent or unbound.

    ``render(name)``, when given, makes the text instead of ``str()`` here (the REPL runner does
    it under the step's limits, in the worker process when the value lives there).
    """
    found = _UPSTREAM_FINAL_VAR.search(response)
    if found is None or found.group(1) not in env:
        return None
    name = found.group(1)
    return render(name) if render is not None else str(env[name])


def is_final(response: str) -> bool:
    """Upstream's plain substring test (so ``FINAL ("x")`` is extractable yet not final)."""
    return "FINAL(" in response or "FINAL_VAR(" in response


def parse_response(
    response: str, env: Mapping[str, Any], *, render: Callable[[str], str] | None = None
) -> str | None:
    """``extract_final`` first, then ``extract_final_var``; None when neither gives an answer."""
    answer = extract_final(response)
    if answer is None:
        answer = extract_final_var(response, env, render=render)
    return answer


# --- fixed parser: public surface ----------------------------------------------------------------


@dataclass(frozen=True)
class FinalResolution:
    """What a response means for the loop.

    ``answer``: the run ends with this text. ``feedback``: the response clearly tried to end but
    could not; the loop shows this to the model so it does not burn iterations guessing why.
    At most one of the two is set. ``method``: how the answer was found, when the rules in use
    name it (0.5.0's ``"worker_variable"`` for ``FINAL_VAR``); None lets the loop use its preset's.
    """

    answer: str | None
    feedback: str | None
    method: str | None = None


@dataclass(frozen=True)
class Directive:
    """The directive that decides a response (see the module docstring for which one that is).

    ``source`` is the call text (``FINAL("x")``) in the response with line endings normalised to
    ``\\n``, or None when its parenthesis is never closed. ``line`` is 1-based.
    """

    kind: str
    line: int
    in_code: bool
    source: str | None

    @property
    def complete(self) -> bool:
        """Whether the directive's parenthesis was closed."""
        return self.source is not None


def resolve_final(
    response: str, env: Mapping[str, Any], *, render: Callable[[str], str] | None = None
) -> FinalResolution:
    """The fixed parser: the answer the response ends the run with, or feedback, or neither.

    ``env`` is the REPL namespace after the response's code ran, so ``x = 1`` followed by
    ``FINAL_VAR(x)`` resolves; ``render(name)`` makes a variable's text when given (see
    :func:`extract_final_var`). Never raises.
    """
    text = _normalise(response)
    hit = _first_directive(text, _fences(response, text))
    if hit is None:
        return _NOTHING
    if hit.close is None:
        return FinalResolution(
            None,
            f"{hit.kind}( on line {_line_of(text, hit.start)} is never closed (missing ')' or an "
            "unterminated string), so it did not end the run.",
        )
    return _resolve(text, hit, env, render)


def is_final_fixed(response: str, env: Mapping[str, Any]) -> bool:
    """True exactly when :func:`resolve_final` returns an answer (the two never disagree)."""
    return resolve_final(response, env).answer is not None


def find_directive(response: str) -> Directive | None:
    """The directive :func:`resolve_final` acts on, without resolving it (for logs and tests)."""
    text = _normalise(response)
    hit = _first_directive(text, _fences(response, text))
    if hit is None:
        return None
    source = None if hit.close is None else text[hit.start : hit.close + 1]
    return Directive(hit.kind, _line_of(text, hit.start), hit.in_code, source)


def missing_variable_error(name: str, env: Mapping[str, Any]) -> FinalVarMissingError:
    """The error the REPL's callable ``FINAL_VAR(name)`` raises for a name not in ``env``.

    Same wording as the fixed parser's feedback, so the model learns one message. Code that calls
    ``FINAL_VAR(answer)`` passes the variable's *value*; when ``name`` is the value of a variable,
    the message says which name to pass instead.
    """
    message = _missing_message(f"FINAL_VAR({_short_repr(name)})", name, env)
    holders = [n for n in user_variables(env) if type(env[n]) is str and env[n] == name]
    if holders:
        message += (
            f". {_short_repr(name)} is the value of {holders[0]}; pass the name: FINAL_VAR({holders[0]!r})"
        )
    return FinalVarMissingError(_short(message, _MAX_FEEDBACK))


def user_variables(env: Mapping[str, Any]) -> list[str]:
    """Names worth listing to the model: data the user created or was given (not private names,
    modules, host functions or the model's functions, which FINAL_VAR would print as ``<function>``)."""
    names = []
    for name, value in env.items():
        if not isinstance(name, str) or name.startswith("_"):
            continue
        if isinstance(value, types.ModuleType) or callable(value):
            continue
        names.append(name)
    return sorted(names)


# --- fixed parser: scanning ----------------------------------------------------------------------

_NOTHING = FinalResolution(None, None)
_PAIR = {")": "(", "]": "[", "}": "{"}
_MAX_EXPR_CHARS = 10_000
_MAX_LISTED = 30
_MAX_FEEDBACK = 1000
_STRING_PREFIXES = frozenset({"r", "u", "b", "br", "rb", "f", "fr", "rf", "t", "tr", "rt"})

# The Python tokens that decide where a call ends: string literals, comments, runs of brackets,
# newlines and backslash continuations. Every branch starts with a literal character (so a search
# skips everything else at C speed), every repetition has branches starting with different
# characters, and nothing after a repetition can fail: no match ever backtracks, the text is walked
# once. The only capturing groups are the closing quotes, so ``lastindex is None`` on a string
# token means it is unterminated: a one-line literal then stops before its newline, a
# triple-quoted one at the end of the text.
_TOKEN = re.compile(
    r"""
      \"\"\"(?:[^"\\]+|\\.|"(?!""))*(\"\"\")?
    | \'\'\'(?:[^'\\]+|\\.|'(?!''))*(\'\'\')?
    | "(?:[^"\\\n]+|\\.)*(")?
    | '(?:[^'\\\n]+|\\.)*(')?
    | \#[^\n]*
    | \([(\[{]* | \[[(\[{]* | \{[(\[{]*
    | \)[)\]}]* | \][)\]}]* | \}[)\]}]*
    | \n
    | \\\n
    """,
    re.VERBOSE | re.DOTALL,
)
_PROSE_DIRECTIVE = re.compile(r"^(FINAL(?:_VAR)?)[ \t\f]*\(", re.MULTILINE)
_DIRECTIVE = re.compile(r"(FINAL(?:_VAR)?)[ \t\f]*\(")
_BLANK = re.compile(r"[ \t\f]*")
_GAP_PART = re.compile(r"[ \t\f\n,]+|\w+|.", re.DOTALL)


@dataclass(frozen=True)
class _Hit:
    kind: str
    start: int
    paren: int
    close: int | None
    in_code: bool


def _normalise(response: str) -> str:
    """Python's tokenizer reads ``\\r\\n`` and ``\\r`` as ``\\n``; so do we, for every position."""
    if "\r" not in response:
        return response
    return response.replace("\r\n", "\n").replace("\r", "\n")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _next_line(text: str, index: int) -> int:
    """Start of the line after the one holding ``index`` (``len(text)`` when there is none)."""
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def _skip_blank(text: str, index: int) -> int:
    found = _BLANK.match(text, index)
    return index if found is None else found.end()


def _fences(response: str, text: str) -> list[Fence]:
    """The fence lexer's blocks of the raw response, as offsets into the normalised ``text``.

    Lexed on the raw text so the parser and the runner (which runs the raw text) see the same
    blocks; each offset is a line start or the end, so shifting by the ``\\r\\n`` pairs before it maps it.
    """
    found = scan_fences(response)
    if text is response or not found:
        return found
    pairs = [m.start() for m in re.finditer("\r\n", response)]

    def at(index: int) -> int:
        return index - bisect.bisect_right(pairs, index - 2)

    return [
        Fence(at(f.start), at(f.body), at(f.body_end), at(f.end), f.tag, f.indent, f.closed) for f in found
    ]


def _first_directive(text: str, fences: list[Fence]) -> _Hit | None:
    """The first complete directive, else the first unclosed one, else None (one forward pass).

    Prose is the text between fences; runnable blocks are read as Python; a shown block (a tag
    outside ``RUN_TAGS``) is neither, so nothing in it ends the run.
    """
    index = 0
    unclosed: _Hit | None = None
    for fence in [*fences, None]:
        region_end = len(text) if fence is None else fence.start
        while (event := _PROSE_DIRECTIVE.search(text, index, region_end)) is not None:
            paren = event.end() - 1
            close, index = _close_in_prose(text, paren, region_end)
            if close is not None:
                return _Hit(event.group(1), event.start(), paren, close, in_code=False)
            unclosed = unclosed or _Hit(event.group(1), event.start(), paren, None, in_code=False)
        if fence is None:
            break
        if fence.runnable:
            hit = _scan_block(text, fence.body, fence.body_end)
            if hit is not None and hit.close is not None:
                return hit
            unclosed = unclosed or hit
        index = fence.end
    return unclosed


def _close_in_prose(text: str, paren: int, end: int) -> tuple[int | None, int]:
    """``(matching ')', where to resume)`` for a prose directive opening at ``paren``.

    Strict: a mismatched bracket, an unterminated one-line string or the next fence (``end``)
    ends the directive unclosed, and the prose scan resumes after it.
    """
    stack = ["("]
    for token in _TOKEN.finditer(text, paren + 1, end):
        start = token.start()
        char = text[start]
        if char in "([{":
            stack.extend(token.group())
        elif char in ")]}":
            for offset, closer in enumerate(token.group()):
                if stack.pop() != _PAIR[closer]:
                    return None, _next_line(text, start)
                if not stack:
                    return start + offset, start + offset + 1
        elif char in "\"'" and token.lastindex is None:
            return None, _next_line(text, token.end())
    return None, end


def _scan_block(text: str, index: int, end: int) -> _Hit | None:
    """Lex a runnable block's body (``text[index:end]``) as Python: its first directive statement.

    Lenient like an editor: an unterminated string ends at its newline or the block's end, a closer
    without a matching opener is ignored, one with an opener deeper down closes everything above it.
    """
    stack: list[str] = []
    opened = {"(": 0, "[": 0, "{": 0}
    pending: tuple[str, int, int] | None = None
    base_indent: list[int] = []
    line, line_pending, logical = index, True, True
    for token in _TOKEN.finditer(text, index, end):
        start = token.start()
        if line_pending:
            line_pending = False
            found = _line_start(text, line, logical and not stack, base_indent)
            if found is not None:
                pending = found
        char = text[start]
        if char == "\n" or char == "\\":
            line, line_pending, logical = token.end(), True, char == "\n" and not stack
        elif char in "([{":
            stack.extend(token.group())
            for opener in opened:
                opened[opener] += token.group().count(opener)
        elif char in ")]}":
            for offset, closer in enumerate(token.group()):
                if not opened[_PAIR[closer]]:
                    continue
                while (top := stack.pop()) != _PAIR[closer]:
                    opened[top] -= 1
                opened[top] -= 1
                if not stack and pending is not None:
                    return _pending_hit(pending, start + offset)
    return _pending_hit(pending, None)


def _line_start(text: str, line: int, logical: bool, base_indent: list[int]) -> tuple[str, int, int] | None:
    """At a physical line start in a block: ``(kind, start, paren)`` when the line is a top-level
    statement that starts with a directive; else None."""
    first = _skip_blank(text, line)
    if not logical or first >= len(text) or text[first] in "#\n":
        return None
    if not base_indent:
        base_indent.append(first - line)
    if first - line > base_indent[0]:
        return None
    found = _DIRECTIVE.match(text, first)
    if found is None:
        return None
    return found.group(1), first, found.end() - 1


def _pending_hit(pending: tuple[str, int, int] | None, close: int | None) -> _Hit | None:
    if pending is None:
        return None
    kind, start, paren = pending
    return _Hit(kind, start, paren, close, in_code=True)


# --- fixed parser: resolving -----------------------------------------------------------------------


def _resolve(
    text: str, hit: _Hit, env: Mapping[str, Any], render: Callable[[str], str] | None
) -> FinalResolution:
    assert hit.close is not None
    source = text[hit.start : hit.close + 1]
    shown = _shown(source, hit, text)
    shape, name = _argument_shape(text, hit.paren + 1, hit.close)
    if shape == "name":
        return _lookup(shown, name, env, render, bare=hit.kind == "FINAL")
    if shape == "expr" and hit.close - hit.paren > _MAX_EXPR_CHARS:
        return _feedback(
            f"{shown}: the argument is too long to read as text; store the value in a variable "
            "and use FINAL_VAR(name)."
        )
    call = _parse_call(source)
    if isinstance(call, str):
        return _feedback(f"{shown}: not valid Python ({call}); pass a string literal.")
    if call.keywords or len(call.args) != 1 or isinstance(call.args[0], ast.Starred):
        return _feedback(f"{shown}: {hit.kind} takes exactly one argument.")
    argument = call.args[0]
    if hit.kind == "FINAL_VAR":
        if isinstance(argument, ast.Name):
            return _lookup(shown, argument.id, env, render, bare=False)
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            return _lookup(shown, argument.value, env, render, bare=False)
        return _feedback(
            f'{shown}: FINAL_VAR takes a variable name, e.g. FINAL_VAR(answer) or FINAL_VAR("answer").'
        )
    if isinstance(argument, ast.Name):
        return _lookup(shown, argument.id, env, render, bare=True)
    return _literal_answer(shown, argument)


def _literal_answer(shown: str, argument: ast.expr) -> FinalResolution:
    try:
        value = ast.literal_eval(argument)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _feedback(
            f"{shown}: the argument is an expression, which only the running code can evaluate; "
            "store it in a variable and use FINAL_VAR(name), or pass a string literal."
        )
    if isinstance(value, str):
        return FinalResolution(value, None)
    if isinstance(value, bytes):
        return _feedback(f"{shown}: a bytes literal is not an answer; pass a str literal.")
    try:
        return FinalResolution(str(value), None)
    except ValueError as exc:  # an int too long for str() under the digit limit
        return _feedback(f"{shown}: {exc}")


def _lookup(
    shown: str,
    name: str,
    env: Mapping[str, Any],
    render: Callable[[str], str] | None,
    *,
    bare: bool,
) -> FinalResolution:
    if name not in env:
        message = _missing_message(shown, name, env)
        if bare:
            message += '. To answer with text, quote it: FINAL("...")'
        return _feedback(message)
    try:
        return FinalResolution(render(name) if render is not None else str(env[name]), None)
    except Exception as exc:  # a user object whose __str__ fails must not crash the loop
        return _feedback(f"{shown}: str() of variable {name!r} failed ({type(exc).__name__}: {exc})")


def _missing_message(shown: str, name: str, env: Mapping[str, Any]) -> str:
    listed = user_variables(env)
    names = ", ".join(_short(n, 40) for n in listed[:_MAX_LISTED]) or "(none)"
    if len(listed) > _MAX_LISTED:
        names += f", ... ({len(listed) - _MAX_LISTED} more)"
    return f"{shown}: no variable named {_short_repr(name)}. Variables: {names}"


def _feedback(message: str) -> FinalResolution:
    return FinalResolution(None, _short(message, _MAX_FEEDBACK))


def _short(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _short_repr(value: str) -> str:
    return _short(repr(value), 60)


def _shown(source: str, hit: _Hit, text: str) -> str:
    """The directive as the model wrote it when short, else a reference to its line."""
    if len(source) <= 60 and "\n" not in source:
        return source
    return f"{hit.kind}(...) on line {_line_of(text, hit.start)}"


def _argument_shape(text: str, start: int, end: int) -> tuple[str, str]:
    """``("strings", "")``, ``("name", name)`` or ``("expr", "")`` for the argument in text[start:end].

    "strings" (plain literals, commas, comments) and "name" are flat, so ``ast`` is safe on them at
    any length; everything else is an expression and is only parsed when short.
    """
    strings = 0
    words: list[str] = []
    position = start
    for token in _TOKEN.finditer(text, start, end):
        gap = _gap_words(text, position, token.start())
        if gap is None:
            return "expr", ""
        position = token.end()
        char = text[token.start()]
        if char in "\"'":
            strings += 1
            if gap and text.endswith(gap[-1], 0, token.start()):
                prefix = gap.pop().lower()  # letters glued to the quote are the literal's prefix
                if prefix not in _STRING_PREFIXES or "f" in prefix or "t" in prefix:
                    return "expr", ""
        elif char in "([{)]}":
            return "expr", ""
        words.extend(gap)
    tail = _gap_words(text, position, end)
    if tail is None:
        return "expr", ""
    words.extend(tail)
    if not words and strings:
        return "strings", ""
    if len(words) == 1 and not strings and words[0].isidentifier() and not keyword.iskeyword(words[0]):
        return "name", words[0]
    return "expr", ""


def _gap_words(text: str, start: int, end: int) -> list[str] | None:
    """The words between two tokens, or None when something else (an operator, a dot) is there."""
    words = []
    for part in _GAP_PART.finditer(text, start, end):
        piece = part.group()
        if piece[0].isalnum() or piece[0] == "_":
            words.append(piece)
        elif piece.strip(" \t\f\n,"):
            return None
    return words


def _parse_call(source: str) -> ast.Call | str:
    """The parsed call, or a short reason why Python rejects it."""
    parked = _park_surrogates(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes warn; the literal is still valid
            tree = ast.parse(source if parked is None else parked, mode="eval")
    except SyntaxError as exc:
        return _short(exc.msg or "syntax error", 120)
    except (ValueError, MemoryError, RecursionError) as exc:
        return type(exc).__name__
    body = tree.body
    if not (isinstance(body, ast.Call) and isinstance(body.func, ast.Name)):
        return "not a call"
    if parked is not None:
        for node in ast.walk(body):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                node.value = node.value.translate(_UNPARK)
    return body


# Lone surrogates (JSON can carry them) make the parser's UTF-8 step fail; they are parked in a
# private-use plane for the parse and put back in the literal's value.
_SURROGATE = re.compile("[\ud800-\udfff]")
_PARKED = re.compile("[\U000f0000-\U000f07ff]")
_PARK = {code: 0xF0000 + code - 0xD800 for code in range(0xD800, 0xE000)}
_UNPARK = {parked: code for code, parked in _PARK.items()}


def _park_surrogates(source: str) -> str | None:
    if _SURROGATE.search(source) is None or _PARKED.search(source) is not None:
        return None
    return source.translate(_PARK)
