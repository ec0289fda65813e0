"""System prompts, byte-identical to upstream's at 2fb46cc and at cc7a826.

Upstream users compare runs across versions, and the prompt is part of what a model sees, so both
texts are kept as data and selected by ``prompt_version``; ``build_system_prompt`` keeps upstream's
signature (the version is an extra keyword).
"""

from __future__ import annotations

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

PROMPT_VERSIONS: Final[dict[str, str]] = {"2fb46cc": _PROMPT_2FB46CC, "cc7a826": _PROMPT_CC7A826}
DEFAULT_PROMPT_VERSION: Final = "cc7a826"


def build_system_prompt(context_size: int, depth: int = 0, *, version: str | None = None) -> str:
    """The system prompt for a context of ``context_size`` characters at recursion ``depth``."""
    template = PROMPT_VERSIONS.get(version or DEFAULT_PROMPT_VERSION)
    if template is None:
        raise ConfigurationError(
            f"unknown prompt_version {version!r}; choose one of {sorted(PROMPT_VERSIONS)}"
        )
    return template.format(size=f"{context_size:,}", depth=depth)


def build_user_prompt(query: str) -> str:
    """The first user message: the query itself, as upstream sends it."""
    return query
