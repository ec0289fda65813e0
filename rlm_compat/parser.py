"""Ending a run: FINAL("...") / FINAL_VAR(name).

Two parsers live here. The module-level ``extract_final``, ``extract_final_var``, ``is_final`` and
``parse_response`` reproduce ysz/recursive-llm 2fb46cc on every input, quirks included, because
drop-in users call ``rlm.parser`` directly and benchmarks scored with it must not move.

The fixed parser (:func:`resolve_final`, used by profile ``fixed`` after the response's code ran)
follows Python's own rules instead: a directive is a statement, its argument is read by ``ast`` (so
escapes, raw, triple-quoted and implicitly concatenated strings mean what Python says), and a run
ends only when the model clearly meant it to. The rules, in short (docs/parser.md has the table):

* Fenced blocks (```` ``` ```` or ``~~~``, any info string) are code: a directive counts when it is the
  first token of a logical line, no deeper indented than the block's first line (so ``if ok:
  FINAL(x)`` and function bodies, which may not have run, never end a run). Text inside strings and
  comments is ignored; a closing fence inside a triple-quoted string does not end the block.
* Outside fences (prose, or an unfenced response) a directive counts only when it starts a line at
  column 0, so ``use FINAL("answer")`` in a sentence, `` `FINAL(x)` `` and indented lines are examples,
  not answers. Its argument may span lines like a Python call; a fence line ends it.
* The first complete directive (its parenthesis closed) decides: an answer, or feedback telling the
  model why it did not end the run. With none complete, the first unclosed one gets feedback.
* ``FINAL("text")`` answers the literal's value exactly (no stripping); another literal answers
  ``str(value)`` like the REPL's callable ``FINAL``; a bare name ``FINAL(x)`` and ``FINAL_VAR(x)`` /
  ``FINAL_VAR("x")`` answer ``str(env[x])``; anything else (calls, f-strings, bytes) gets feedback.

Scanning is linear in the response length: one forward pass, regex searches only for single
character classes (no backtracking), and ``ast`` only sees a closed directive whose argument is flat
or short (deep expressions crash CPython 3.10's parser).
"""

from __future__ import annotations

import ast
import keyword
import re
import types
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import FinalVarMissingError

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


def extract_final_var(response: str, env: Mapping[str, Any]) -> str | None:
    """``str(env[name])`` for the first ``FINAL_VAR(name)``, or None when absent or unbound."""
    found = _UPSTREAM_FINAL_VAR.search(response)
    if found is None or found.group(1) not in env:
        return None
    return str(env[found.group(1)])


def is_final(response: str) -> bool:
    """Upstream's plain substring test (so ``FINAL ("x")`` is extractable yet not final)."""
    return "FINAL(" in response or "FINAL_VAR(" in response


def parse_response(response: str, env: Mapping[str, Any]) -> str | None:
    """``extract_final`` first, then ``extract_final_var``; None when neither gives an answer."""
    answer = extract_final(response)
    if answer is None:
        answer = extract_final_var(response, env)
    return answer


# --- fixed parser: public surface ----------------------------------------------------------------


@dataclass(frozen=True)
class FinalResolution:
    """What a response means for the loop.

    ``answer``: the run ends with this text. ``feedback``: the response clearly tried to end but
    could not; the loop shows this to the model so it does not burn iterations guessing why.
    At most one of the two is set.
    """

    answer: str | None
    feedback: str | None


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


def resolve_final(response: str, env: Mapping[str, Any]) -> FinalResolution:
    """The fixed parser: the answer the response ends the run with, or feedback, or neither.

    ``env`` is the REPL namespace after the response's code ran, so ``x = 1`` followed by
    ``FINAL_VAR(x)`` resolves. Never raises.
    """
    text = _normalise(response)
    hit = _first_directive(text)
    if hit is None:
        return _NOTHING
    if hit.close is None:
        return FinalResolution(
            None,
            f"{hit.kind}( on line {_line_of(text, hit.start)} is never closed (missing ')' or an "
            "unterminated string), so it did not end the run.",
        )
    return _resolve(text, hit, env)


def is_final_fixed(response: str, env: Mapping[str, Any]) -> bool:
    """True exactly when :func:`resolve_final` returns an answer (the two never disagree)."""
    return resolve_final(response, env).answer is not None


def find_directive(response: str) -> Directive | None:
    """The directive :func:`resolve_final` acts on, without resolving it (for logs and tests)."""
    text = _normalise(response)
    hit = _first_directive(text)
    if hit is None:
        return None
    source = None if hit.close is None else text[hit.start : hit.close + 1]
    return Directive(hit.kind, _line_of(text, hit.start), hit.in_code, source)


def missing_variable_error(name: str, env: Mapping[str, Any]) -> FinalVarMissingError:
    """The error the REPL's callable ``FINAL_VAR(name)`` raises for a name not in ``env``.

    Same wording as the fixed parser's feedback, so the model learns one message.
    """
    return FinalVarMissingError(_missing_message(f"FINAL_VAR({_short_repr(name)})", name, env))


def user_variables(env: Mapping[str, Any]) -> list[str]:
    """Names worth listing to the model: data the user created or was given.

    Private names, modules and callables (host functions such as ``recursive_llm`` or ``FINAL``,
    and functions the model defined, which FINAL_VAR would only print as ``<function ...>``) are
    left out.
    """
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
_KINDS = ("FINAL", "FINAL_VAR")
_PAIR = {")": "(", "]": "[", "}": "{"}
_MAX_EXPR_CHARS = 10_000
_MAX_LISTED = 30
_STRING_PREFIXES = frozenset({"r", "u", "b", "br", "rb", "f", "fr", "rf", "t", "tr", "rt"})

# Each pattern is one character class: a search is a single forward scan, never a backtrack.
_CODE_SPECIAL = re.compile(r"[\"'#()\[\]{}\\\n]")
_ARG_SPECIAL = re.compile(r"[^ \t\f\n]")
_LINE_BODY = {'"': re.compile(r'["\\\n]'), "'": re.compile(r"['\\\n]")}
_TRIPLE_BODY = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_WORD = re.compile(r"\w+")
_BLANK = re.compile(r"[ \t\f]*")
_RUN = {"`": re.compile(r"`+"), "~": re.compile(r"~+")}


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


def _directive_at(text: str, index: int) -> tuple[str, int] | None:
    """``(kind, index of '(')`` when a FINAL / FINAL_VAR call starts exactly at ``index``."""
    if not text.startswith("FINAL", index):
        return None
    word = _WORD.match(text, index)
    if word is None or word.group() not in _KINDS:
        return None
    paren = _skip_blank(text, word.end())
    if paren < len(text) and text[paren] == "(":
        return word.group(), paren
    return None


def _fence_open(text: str, index: int) -> tuple[str, int] | None:
    """``(fence character, length)`` when a Markdown fence opens at ``index``."""
    if not text.startswith(("```", "~~~"), index):
        return None
    char = text[index]
    run = _RUN[char].match(text, index)
    assert run is not None
    if char == "`":
        line_end = text.find("\n", run.end())
        if text.find("`", run.end(), len(text) if line_end < 0 else line_end) >= 0:
            return None  # ```code``` on one line is an inline span, not a fence
    return char, run.end() - index


def _fence_close(text: str, index: int, char: str, length: int) -> bool:
    if not text.startswith(char * length, index):
        return False
    run = _RUN[char].match(text, index)
    assert run is not None
    rest = _skip_blank(text, run.end())
    return rest == len(text) or text[rest] == "\n"


def _string_end(text: str, quote_at: int) -> tuple[int, bool]:
    """``(index after the literal, terminated)`` for the string opening at ``quote_at``.

    Raw and plain literals tokenize alike (a backslash always protects the next character), so
    prefixes do not matter here; ``ast`` applies them later. An unterminated one-line literal stops
    at its newline, an unterminated triple-quoted one at the end of the text.
    """
    quote = text[quote_at]
    if text.startswith(quote * 3, quote_at):
        body = _TRIPLE_BODY[quote]
        index = quote_at + 3
        while (found := body.search(text, index)) is not None:
            at = found.start()
            if text[at] == "\\":
                index = at + 2
            elif text.startswith(quote * 3, at):
                return at + 3, True
            else:
                index = at + 1
        return len(text), False
    body = _LINE_BODY[quote]
    index = quote_at + 1
    while (found := body.search(text, index)) is not None:
        at = found.start()
        char = text[at]
        if char == "\\":
            index = at + 2
        elif char == "\n":
            return at, False
        else:
            return at + 1, True
    return len(text), False


def _first_directive(text: str) -> _Hit | None:
    """The first complete directive, else the first unclosed one, else None (one forward pass)."""
    size = len(text)
    index = 0
    unclosed: _Hit | None = None
    while index < size:
        start = _skip_blank(text, index)
        fence = _fence_open(text, start)
        if fence is not None:
            hit, index = _scan_block(text, _next_line(text, start), *fence)
            if hit is not None and hit.close is not None:
                return hit
            unclosed = unclosed or hit
            continue
        if start == index and (found := _directive_at(text, index)) is not None:
            kind, paren = found
            close, index = _close_in_prose(text, paren)
            hit = _Hit(kind, start, paren, close, in_code=False)
            if close is not None:
                return hit
            unclosed = unclosed or hit
            continue
        index = _next_line(text, index)
    return unclosed


def _close_in_prose(text: str, paren: int) -> tuple[int | None, int]:
    """``(matching ')', where to resume)`` for a prose directive opening at ``paren``.

    Strict: a mismatched bracket, an unterminated one-line string or a fence line ends the
    directive unclosed, and the prose scan resumes after it.
    """
    stack = ["("]
    index = paren + 1
    while (found := _CODE_SPECIAL.search(text, index)) is not None:
        at = found.start()
        char = text[at]
        if char in "\"'":
            index, terminated = _string_end(text, at)
            if not terminated:
                return None, _next_line(text, index)
        elif char == "#":
            index = text.find("\n", at)
            if index < 0:
                break
        elif char in "([{":
            stack.append(char)
            index = at + 1
        elif char in ")]}":
            if stack[-1] != _PAIR[char]:
                return None, _next_line(text, at)
            stack.pop()
            if not stack:
                return at, at + 1
            index = at + 1
        elif char == "\\":
            index = at + 2
        else:
            index = at + 1
            if text.startswith(("```", "~~~"), _skip_blank(text, index)):
                return None, index
    return None, len(text)


def _scan_block(text: str, index: int, fence: str, length: int) -> tuple[_Hit | None, int]:
    """Lex a fenced block as Python: ``(first directive statement, index after the block)``.

    Lenient like an editor: an unterminated one-line string ends at its newline, a closer without a
    matching opener is ignored, one with an opener deeper down closes everything above it.
    """
    size = len(text)
    stack: list[str] = []
    opened = {"(": 0, "[": 0, "{": 0}
    pending: tuple[str, int, int] | None = None
    base_indent: int | None = None
    line_start = logical = True
    while index <= size:
        if line_start:
            line_start = False
            first = _skip_blank(text, index)
            if _fence_close(text, first, fence, length):
                return _pending_hit(pending, None), _next_line(text, first)
            if logical and not stack and first < size and text[first] not in "#\n":
                indent = first - index
                base_indent = indent if base_indent is None else base_indent
                found = _directive_at(text, first) if indent <= base_indent else None
                if found is not None:
                    pending = (found[0], first, found[1])
                    stack.append("(")
                    opened["("] += 1
                    index = found[1] + 1
                    continue
            index = first
        special = _CODE_SPECIAL.search(text, index)
        if special is None:
            break
        at = special.start()
        char = text[at]
        if char == "\n":
            index, line_start, logical = at + 1, True, not stack
        elif char in "\"'":
            index = _string_end(text, at)[0]
        elif char == "#":
            index = text.find("\n", at)
            if index < 0:
                break
        elif char in "([{":
            stack.append(char)
            opened[char] += 1
            index = at + 1
        elif char in ")]}":
            index = at + 1
            if not opened[_PAIR[char]]:
                continue
            while True:
                top = stack.pop()
                opened[top] -= 1
                if top == _PAIR[char]:
                    break
            if not stack and pending is not None:
                return _pending_hit(pending, at), index
        elif text.startswith("\n", at + 1):  # backslash continuation
            index, line_start, logical = at + 2, True, False
        else:
            index = at + 1
    return _pending_hit(pending, None), size


def _pending_hit(pending: tuple[str, int, int] | None, close: int | None) -> _Hit | None:
    if pending is None:
        return None
    kind, start, paren = pending
    return _Hit(kind, start, paren, close, in_code=True)


# --- fixed parser: resolving -----------------------------------------------------------------------


def _resolve(text: str, hit: _Hit, env: Mapping[str, Any]) -> FinalResolution:
    assert hit.close is not None
    source = text[hit.start : hit.close + 1]
    shown = _shown(source, hit, text)
    shape, name = _argument_shape(text, hit.paren + 1, hit.close)
    if shape == "name":
        return _lookup(shown, name, env, bare=hit.kind == "FINAL")
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
            return _lookup(shown, argument.id, env, bare=False)
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            return _lookup(shown, argument.value, env, bare=False)
        return _feedback(
            f'{shown}: FINAL_VAR takes a variable name, e.g. FINAL_VAR(answer) or FINAL_VAR("answer").'
        )
    if isinstance(argument, ast.Name):
        return _lookup(shown, argument.id, env, bare=True)
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


def _lookup(shown: str, name: str, env: Mapping[str, Any], *, bare: bool) -> FinalResolution:
    if name not in env:
        message = _missing_message(shown, name, env)
        if bare:
            message += '. To answer with text, quote it: FINAL("...")'
        return _feedback(message)
    try:
        return FinalResolution(str(env[name]), None)
    except Exception as exc:  # a user object whose __str__ fails must not crash the loop
        return _feedback(f"{shown}: str() of variable {name!r} failed ({type(exc).__name__}: {exc})")


def _missing_message(shown: str, name: str, env: Mapping[str, Any]) -> str:
    listed = user_variables(env)
    names = ", ".join(_short(n, 40) for n in listed[:_MAX_LISTED]) or "(none)"
    if len(listed) > _MAX_LISTED:
        names += f", ... ({len(listed) - _MAX_LISTED} more)"
    return f"{shown}: no variable named {_short_repr(name)}. Variables: {names}"


def _feedback(message: str) -> FinalResolution:
    return FinalResolution(None, message)


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
    names: list[str] = []
    index = start
    while (found := _ARG_SPECIAL.search(text, index, end)) is not None:
        at = found.start()
        char = text[at]
        if char in "\"'":
            strings += 1
            index = _string_end(text, at)[0]
        elif char == "#":
            newline = text.find("\n", at, end)
            index = end if newline < 0 else newline
        elif char == "\\" and text.startswith("\n", at + 1):
            index = at + 2
        elif char == ",":
            index = at + 1
        elif (word := _WORD.match(text, at, end)) is not None:
            index = word.end()
            if index < end and text[index] in "\"'" and word.group().lower() in _STRING_PREFIXES:
                if "f" in word.group().lower() or "t" in word.group().lower():
                    return "expr", ""
                continue  # the literal itself is counted on the next turn
            names.append(word.group())
        else:
            return "expr", ""
    if not names and strings:
        return "strings", ""
    if len(names) == 1 and not strings:
        name = names[0]
        if name.isidentifier() and not keyword.iskeyword(name):
            return "name", name
    return "expr", ""


def _parse_call(source: str) -> ast.Call | str:
    """The parsed call, or a short reason why Python rejects it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes warn; the literal is still valid
            tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        return exc.msg or "syntax error"
    except (ValueError, MemoryError, RecursionError) as exc:
        return type(exc).__name__
    body = tree.body
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name):
        return body
    return "not a call"
