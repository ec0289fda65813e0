"""An independent model of 2fb46cc's parser, written from its documented behaviour, plus inputs.

docs (../shared/reference/upstream-2fb46cc.md and docs/parser.md) describe the parser in words:
FINAL followed by optional whitespace, '(', optional whitespace and a quote; the four quote forms
are tried in order over the whole text, triple quotes capturing up to the *last* matching triple
quote, single quotes up to the next one; the capture is stripped. FINAL_VAR takes a run of word
characters between optional whitespace and ')'. The model below follows those words with plain
index arithmetic, so a test comparing it with ``rlm_compat.parser`` checks two independent
readings of the same specification. "Whitespace" and "word character" are ``str.isspace`` and
``str.isalnum() or '_'`` here; a test checks that they equal ``re``'s ``\\s`` and ``\\w``.

The strategies are biased towards text that stresses those rules.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import strategies as st

# --- the model -----------------------------------------------------------------------------------


def _occurrences(text: str, word: str) -> Iterator[int]:
    start = text.find(word)
    while start >= 0:
        yield start
        start = text.find(word, start + 1)


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _argument_start(text: str, at: int, word: str) -> int | None:
    """Index after ``word``, whitespace, '(' and whitespace when they follow ``at``; else None."""
    index = _skip_space(text, at + len(word))
    if index >= len(text) or text[index] != "(":
        return None
    return _skip_space(text, index + 1)


def model_extract_final(text: str) -> str | None:
    for quote in ('"""', "'''", '"', "'"):
        for at in _occurrences(text, "FINAL"):
            start = _argument_start(text, at, "FINAL")
            if start is None or not text.startswith(quote, start):
                continue
            body = start + len(quote)
            # Triple quotes are greedy: the capture runs to the last triple quote in the text.
            end = text.rfind(quote) if len(quote) == 3 else text.find(quote, body)
            if end >= body:
                return text[body:end].strip()
    return None


def model_final_var_name(text: str) -> str | None:
    for at in _occurrences(text, "FINAL_VAR"):
        start = _argument_start(text, at, "FINAL_VAR")
        if start is None:
            continue
        end = start
        while end < len(text) and (text[end].isalnum() or text[end] == "_"):
            end += 1
        if end > start:
            close = _skip_space(text, end)
            if close < len(text) and text[close] == ")":
                return text[start:end]
    return None


def model_extract_final_var(text: str, env: Mapping[str, Any]) -> str | None:
    name = model_final_var_name(text)
    if name is None or name not in env:
        return None
    return str(env[name])


def model_is_final(text: str) -> bool:
    for at in _occurrences(text, "FINAL"):
        rest = at + len("FINAL")
        if text[rest : rest + 1] == "(" or text[rest : rest + 5] == "_VAR(":
            return True
    return False


def model_parse_response(text: str, env: Mapping[str, Any]) -> str | None:
    answer = model_extract_final(text)
    return answer if answer is not None else model_extract_final_var(text, env)


# --- inputs ----------------------------------------------------------------------------------------

FRAGMENTS: tuple[str, ...] = (
    "FINAL",
    "FINAL(",
    "FINAL(",
    "FINAL_VAR(",
    "FINAL_VAR",
    "FINAL (",
    "FINAL\n(",
    "FINAL_VAR (",
    "MY_FINAL(",
    "FINALE(",
    "final(",
    "(",
    ")",
    ")",
    "((",
    "))",
    "[",
    "]",
    "{",
    "}",
    '"',
    '"',
    "'",
    "'",
    '"""',
    '"""',
    "'''",
    "'''",
    '""',
    "''",
    "\\",
    '\\"',
    "\\'",
    "\\\\",
    "\\n",
    "\n",
    "\n",
    " ",
    "  ",
    "\t",
    "\r\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x85",
    "\u00a0",
    "\u2028",
    "\u3000",
    "\x00",
    "answer",
    "x",
    "result",
    "42",
    "é",
    "日本語",
    "🙂",
    "²",
    "٣",
    "```python\n",
    "```\n",
    "~~~\n",
    "`",
    "#",
    ",",
    "+",
    "r",
    "b",
    "f",
    "u",
    "=",
    ":",
)
NAMES: tuple[str, ...] = ("answer", "result", "x", "items", "context", "_private", "résumé", "a1")

fragment_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=24).map("".join)
"""Text made mostly of directive pieces, quotes, escapes, brackets and odd whitespace."""

small_alphabet_text = st.text(alphabet=st.sampled_from(list("FINAL_VR()\"'\\ \n\tx#`")), max_size=60)
"""Short text over the characters that matter, so rare collisions become common."""

_QUOTES = ('"""', "'''", '"', "'", "", 'r"', "b'", '"""', '"')
_SPACES = ("", "", " ", "\n", "\t", "\u00a0", "  \n ", "\x1c", "\u3000")
directive_like = st.tuples(
    st.sampled_from(["FINAL", "FINAL", "FINAL_VAR", "FINAL_VAR", "MY_FINAL", "final", "FINAL_VARS"]),
    st.sampled_from(_SPACES),
    st.sampled_from(["(", "(", "(", "", "(("]),
    st.sampled_from(_SPACES),
    st.sampled_from(_QUOTES),
    st.one_of(st.sampled_from(NAMES), st.text(max_size=6), st.sampled_from(FRAGMENTS)),
    st.sampled_from(_QUOTES),
    st.sampled_from(_SPACES),
    st.sampled_from([")", ")", ")", "", "))", ") FINAL"]),
).map("".join)
"""One directive-shaped chunk: name, gaps, parenthesis, quotes and content drawn independently."""

final_var_like = st.tuples(
    st.sampled_from(["FINAL_VAR", "FINAL_VAR", "XFINAL_VAR", "FINAL_VAR_"]),
    st.sampled_from(_SPACES),
    st.sampled_from(["(", "(", "", "(("]),
    st.sampled_from(_SPACES),
    st.one_of(st.sampled_from(NAMES), st.sampled_from(["a.b", "my-var", "1", "é²", "", "'x'"])),
    st.sampled_from(_SPACES),
    st.sampled_from([")", ")", "", "))"]),
).map("".join)

directive_text = st.lists(
    st.one_of(
        directive_like, directive_like, final_var_like, st.sampled_from(FRAGMENTS), st.text(max_size=3)
    ),
    min_size=1,
    max_size=6,
).map("".join)

final_heavy_text = st.one_of(
    directive_text, directive_text, fragment_text, small_alphabet_text, st.text(max_size=40)
)

env_values = st.one_of(
    st.text(max_size=12), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=3)
)


@st.composite
def text_and_env(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """FINAL-heavy text and an env that often binds the names the text mentions."""
    text = draw(final_heavy_text)
    names = list(NAMES)
    if model_final_var_name(text) is not None:
        names.append(draw(st.sampled_from([model_final_var_name(text) or "x", "x"])))
    keys = draw(st.lists(st.sampled_from(names), unique=True, max_size=4))
    return text, {key: draw(env_values) for key in keys}


identifiers = st.one_of(
    st.sampled_from(NAMES),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
).filter(lambda name: not keyword.iskeyword(name))
