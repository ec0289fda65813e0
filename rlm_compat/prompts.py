"""System prompts, byte-identical to upstream's at 2fb46cc and at cc7a826, and to PyPI's
recursive-llm 0.5.0.

Upstream users compare runs across versions, and the prompt is part of what a model sees, so the
texts are kept as data and selected by ``prompt_version`` (``"0.5.0"`` is the 0.5 API preset's
default: its prompt tells the model the protocol that preset enforces, a response being either
one Python step or a standalone FINAL). ``build_system_prompt`` keeps upstream's signature and
0.5.0's third argument ``max_depth`` (which only 0.5.0's text uses); the version is an extra keyword.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .errors import ConfigurationError

__all__ = ["DEFAULT_PROMPT_VERSION", "PROMPT_VERSIONS", "build_system_prompt", "build_user_prompt"]

_HEAD = """You are a Recursive Language Model. You interact with context through a Python REPL environment.

The context is stored in variable `context` (not in this prompt). Size: {size} characters.
"""

_PROMPT_2FB46CC = (
    _HEAD
    + """
Available in environment:
- context: str (the document to analyze)
- query: str (the question: "{{query}}")
- recursive_llm(sub_query, sub_context) -> str (recursively process sub-context)
- re: already imported regex module (use re.findall, re.search, etc.)

Write Python code to answer the query. The last expression or print() output will be shown to you.

Examples:
- print(context[:100])  # See first 100 chars
- errors = re.findall(r'ERROR', context)  # Find all ERROR
- count = len(errors); print(count)  # Count and show

When you have the answer, use FINAL("answer") - this is NOT a function, just write it as text.

Depth: {depth}"""
)

_PROMPT_CC7A826 = (
    _HEAD
    + """IMPORTANT: You cannot see the context directly. You MUST write Python code to search and explore it.

Available in environment:
- context: str (the document to analyze)
- query: str (the question)
- recursive_llm(sub_query, sub_context) -> str (recursively process sub-context)
- re: already imported regex module (use re.findall, re.search, etc.)

Write Python code to answer the query. The last expression or print() output will be shown to you.

Examples:
- print(context[:500])  # See first 500 chars
- matches = re.findall(r'keyword.*', context); print(matches[:5])
- idx = context.find('search term'); print(context[idx:idx+200])

CRITICAL: Do NOT guess or make up answers. You MUST search the context first to find the actual information.
Only use FINAL("answer") after you have found concrete evidence in the context.

Depth: {depth}"""
)

_PROMPT_050 = (
    _HEAD
    + """IMPORTANT: You cannot see the context directly. You MUST write Python code to search and explore it.

Available in environment:
- context: str (the document to analyze)
- query: str (the question)
{recursive_api}
- re: already imported regex module (use re.findall, re.search, etc.)

Each response must be exactly one of these two forms:
1. Executable Python code for one REPL step. Do not wrap it in Markdown fences or include FINAL in it.
2. A standalone FINAL("answer") or FINAL_VAR(variable_name) directive after the REPL has shown you
   enough evidence. FINAL is a protocol directive, not a Python function: never call, print, assign,
   or place it inside Python code or a conditional block.

Imports are restricted. Use the objects already available in the environment. In particular,
use `re` directly without writing `import re`.

The last expression or print() output from a Python step will be shown to you exactly once. After
seeing that output, use a new response for either the next Python step or the standalone final.

Examples:
- print(context[:500])
- matches = re.findall(r'keyword.*', context); print(matches[:5])
- idx = context.find('search term'); print(context[idx:idx+200])

CRITICAL: Do NOT guess or make up answers. You MUST search the context first to find the actual information.
Only use a standalone FINAL("answer") after you have found concrete evidence in the context.

Depth: {depth}. max_depth: {max_depth}. {depth_note}"""
)

_RECURSIVE_API_050 = "- recursive_llm(sub_query, sub_context) -> str (recursively process sub-context)"
_NO_SUBCALLS_050 = "- LM subcalls are disabled for this run."

PROMPT_VERSIONS: Final[dict[str, str]] = {
    "2fb46cc": _PROMPT_2FB46CC,
    "cc7a826": _PROMPT_CC7A826,
    "0.5.0": _PROMPT_050,
}
DEFAULT_PROMPT_VERSION: Final = "cc7a826"


def build_system_prompt(
    context_size: int,
    depth: int = 0,
    max_depth: int = 1,
    *,
    version: str | None = None,
    tools: Sequence[str] = (),
) -> str:
    """The system prompt for a context of ``context_size`` characters at recursion ``depth``
    (``max_depth``, 0.5.0's sub-call capability, is shown by its text only).

    ``tools``: one line per custom tool (:meth:`rlm_compat.custom_tools.Tool.prompt_line`), listed
    after the ``re`` line of every version's "Available in environment" list; without tools the
    text is the release's, byte for byte.
    """
    template = PROMPT_VERSIONS.get(version or DEFAULT_PROMPT_VERSION)
    if template is None:
        raise ConfigurationError(
            f"unknown prompt_version {version!r}; choose one of {sorted(PROMPT_VERSIONS)}"
        )
    text = template.format(size=f"{context_size:,}", depth=depth, **_depth_lines_050(depth, max_depth))
    if tools:
        text = text.replace(_RE_LINE, "\n".join([_RE_LINE, *tools]), 1)
    return text


_RE_LINE = "- re: already imported regex module (use re.findall, re.search, etc.)"


def _depth_lines_050(depth: int, max_depth: int) -> dict[str, object]:
    """What 0.5.0's text says about sub-calls: none at ``max_depth`` 0, a plain model call at the
    last level, a child RLM above it."""
    if max_depth == 0:
        return {"recursive_api": _NO_SUBCALLS_050, "depth_note": "No subcalls are available.", "max_depth": 0}
    note = (
        "recursive_llm makes one plain LM call at this boundary."
        if depth + 1 >= max_depth
        else "recursive_llm creates a child RLM."
    )
    return {"recursive_api": _RECURSIVE_API_050, "depth_note": note, "max_depth": max_depth}


def build_user_prompt(query: str) -> str:
    """The first user message: the query itself, as upstream sends it."""
    return query
