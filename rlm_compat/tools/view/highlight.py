"""Server-side highlighting as data: Pygments tokens, never Pygments HTML.

The page builds each token as a ``<span class=...>`` whose text is set with ``textContent``, so
highlighted model code is as inert as plain text; the colours come from Pygments' own style sheet.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["highlight_tokens", "style_css"]

STYLE = "default"


@lru_cache(maxsize=1)
def _lexers() -> tuple[Any, Any]:
    from pygments.lexers import MarkdownLexer, PythonLexer

    return PythonLexer(stripnl=False, ensurenl=False), MarkdownLexer(stripnl=False, ensurenl=False)


def highlight_tokens(text: str) -> list[str]:
    """``[css_class, text, css_class, text, ...]`` for ``text``; a reply with fences lexes as Markdown.

    Markdown's lexer highlights fenced ``python`` blocks with the Python lexer and keeps the prose;
    text without fences is read as bare code. Runs of one class are merged to keep the page small.
    """
    from pygments.token import STANDARD_TYPES

    python, markdown = _lexers()
    lexer = markdown if "```" in text else python
    flat: list[str] = []
    # Markdown's fence rule wants a newline after the closing fence; it is taken off again below.
    for token, value in lexer.get_tokens(text + "\n"):
        css = ""
        while token is not None:
            css = STANDARD_TYPES.get(token, "")
            if css or token.parent is None:
                break
            token = token.parent
        if flat and flat[-2] == css:
            flat[-1] += value
        else:
            flat += [css, value]
    while flat and len("".join(flat[1::2])) > len(text):
        extra = len("".join(flat[1::2])) - len(text)
        if len(flat[-1]) > extra:
            flat[-1] = flat[-1][:-extra]
        else:
            del flat[-2:]
    return flat


def style_css(scope: str = ".hl") -> str:
    """Pygments' style sheet for token classes under ``scope``."""
    from pygments.formatters import HtmlFormatter

    return str(HtmlFormatter(style=STYLE).get_style_defs(scope))
