"""The one fence lexer: the fixed parser, the runner's preprocessor and the CPython reference agree.

Texts are generated from lines that stress the fence rules of docs/parser.md ("Fences"): openers
with every kind of info string and indentation, backticks and tildes of several lengths, closers
too short or of the other character, unclosed blocks, inline spans that look like fences, CRLF
line ends, and exactly one ``FINAL("marker")`` line somewhere. An independent line-by-line reading
of the documented rules (below, string methods only) says for every line whether it is prose, a
fence line, runnable code or a shown block's body; the runner's code, the reference executor's
code and the parser's decision about the marker must all follow from that reading.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlm_compat.errors import REPLError
from rlm_compat.fences import FIRST_FENCE_2FB46CC, extract_code, first_fence_2fb46cc
from rlm_compat.parser import find_directive, resolve_final
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.restrict.prep import extract
from rlm_compat.tools.conformance.reference import extract as reference_extract

_SOME = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_RUN = ("", "python", "py", "python3", "py3", "repl")
MARKER = 'FINAL("marker")'

# --- the independent reading -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Open:
    char: str
    length: int
    tag: str
    indent: bool


def _opener(line: str) -> _Open | None:
    stripped = line.lstrip(" \t")
    char = stripped[:1]
    if char not in ("`", "~"):
        return None
    length = len(stripped) - len(stripped.lstrip(char))
    rest = stripped[length:]
    if length < 3 or "`" in rest:
        return None
    tag = (rest.lstrip(" \t").split() or [""])[0].lower()
    return _Open(char, length, tag, stripped != line)


def _closes(line: str, opened: _Open) -> bool:
    body = line.strip(" \t")
    return len(body) >= opened.length and body == opened.char * len(body)


def classify(lines: list[str]) -> tuple[list[str], list[str]]:
    """Per line ``prose``/``fence``/``run``/``shown``, and the runner's code per runnable block
    (an indented fence's body dedented)."""
    kinds: list[str] = []
    blocks: list[str] = []
    opened: _Open | None = None
    body: list[str] = []
    for line in lines:
        if opened is None:
            opened, body = _opener(line), []
            kinds.append("prose" if opened is None else "fence")
        elif _closes(line, opened):
            kinds.append("fence")
            blocks += _runnable(opened, body)
            opened = None
        else:
            kinds.append("run" if opened.tag in _RUN else "shown")
            body.append(line)
    if opened is not None:
        blocks += _runnable(opened, body)
    return kinds, blocks


def _runnable(opened: _Open, body: list[str]) -> list[str]:
    if opened.tag not in _RUN:
        return []
    joined = "\n".join(body)
    return [textwrap.dedent(joined) if opened.indent else joined]


# --- generated texts -------------------------------------------------------------------------------

_INDENT = st.sampled_from(["", "", " ", "   ", "    ", "\t"])
_RUNS = st.sampled_from(["```", "```", "````", "~~~", "~~~~", "``"])
_INFO = st.sampled_from(
    ["", "", "python", "py", "repl", "Python", "python3 title", " python", "json", "text", "bash", "x`y"]
)
_PLAIN = st.sampled_from(
    [
        "x = 1",
        "print(1)",
        "# a comment (",
        "Some prose here.",
        'use `FINAL("q")` inline',
        "inline ```x``` span",
        "~~~ `not a fence`",
        "",
        "s = '```'",
    ]
)
_LINE = st.one_of(
    _PLAIN,
    st.builds(lambda i, r, t: f"{i}{r}{t}", _INDENT, _RUNS, _INFO),
    st.builds(lambda i, r, s: f"{i}{r}{s}", _INDENT, _RUNS, st.sampled_from(["", "  ", "\t"])),
)


@st.composite
def texts(draw: st.DrawFn) -> tuple[list[str], str]:
    lines = draw(st.lists(_LINE, max_size=10))
    lines.insert(draw(st.integers(0, len(lines))), MARKER)
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return lines, newline.join(lines)


# --- properties ----------------------------------------------------------------------------------


@_SOME
@given(texts())
def test_runner_reference_and_parser_agree_on_what_is_code(drawn: tuple[list[str], str]) -> None:
    lines, text = drawn
    kinds, blocks = classify(text.split("\n"))  # a "\r" stays in its line: lines end at "\n" only
    runner = extract(text, False)
    assert (runner.source, runner.line_map, runner.blocks) == reference_extract(text)
    any_fence = "fence" in kinds
    if any_fence:
        assert (runner.source, runner.blocks) == ("\n".join(blocks), len(blocks))
    else:
        assert (runner.source, runner.blocks) == (text, 1)

    where = kinds[lines.index(MARKER)]
    directive = find_directive(text)
    answer = resolve_final(text, {}).answer
    if where == "run":
        assert directive is not None and directive.in_code and answer == "marker"
        assert MARKER in runner.source
    elif where == "prose":
        assert directive is not None and not directive.in_code and answer == "marker"
        assert (MARKER in runner.source) is not any_fence
    else:  # a shown block's body: neither run nor read as a directive
        assert directive is None and answer is None
        assert MARKER not in runner.source


@_SOME
@given(texts())
def test_first_fence_mode_is_2fb46cc_substring_rule(drawn: tuple[list[str], str]) -> None:
    """Profile upstream's mode: found by substring, not by line (a recorded upstream quirk)."""
    _, text = drawn
    code, lines, blocks = extract_code(text, FIRST_FENCE_2FB46CC)
    assert code == first_fence_2fb46cc(text) and blocks == 1
    assert len(lines) == code.count("\n") + 1
    if "```" not in text:
        assert code == text


@pytest.mark.parametrize(
    ("response", "output"),
    [
        ("```python\nprint('a')\n```\n```json\nprint('b')\n```\n~~~py\nprint('c')\n~~~", "a\nc"),
        ("  ```python\n  print('indented')\n  ```", "indented"),
    ],
)
def test_the_runner_runs_exactly_the_runnable_blocks(response: str, output: str) -> None:
    executor = REPLExecutor(timeout=5, profile="fixed", isolation="inline")
    assert executor.execute(response, {}) == output


def test_a_fence_line_inside_a_string_ends_the_block_for_runner_and_parser() -> None:
    response = "```python\ns = '''x\n```\nFINAL('after')\n'''\n```"
    executor = REPLExecutor(timeout=5, profile="fixed", isolation="inline")
    with pytest.raises(REPLError, match="unterminated triple-quoted string"):
        executor.execute(response, {})
    directive = find_directive(response)
    assert directive is not None and not directive.in_code and directive.line == 4
