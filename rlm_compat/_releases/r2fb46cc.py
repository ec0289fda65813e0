"""ysz/recursive-llm 2fb46cc (its 0.1.0; cc7a826 keeps the contract): what this release decides.

2fb46cc's contract is the default (:data:`PRESET`). Where it
ends a node, the *profile* decides, not the release: profile ``upstream`` (switch
``upstream_parser``) takes 2fb46cc's ``is_final`` + ``parse_response`` rule, profile ``fixed``
the fixed parser; the profile's ``final_before_exec`` says whether the directive is read before
the code runs. Its REPL offers ``llm_query(prompt, model=None)`` and ``recursive_llm`` as a
child RLM; it has no ``answer`` dict and no shaped trajectory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import parser
from ..parser import FinalResolution
from ..profiles import Profile
from .contract import ApiSemantics, register

__all__ = ["NAME", "PRESET", "final_rule", "upstream_resolution"]

NAME = "2fb46cc"
PRESET = register(ApiSemantics(), "2fb46cc", "cc7a826", "0.1")
"""The release's data: :class:`ApiSemantics`'s field defaults are 2fb46cc's contract (the default)."""

Rule = Callable[..., FinalResolution]


def final_rule(profile: Profile) -> tuple[str, Rule, bool]:
    """``(name, rule, first)``: the profile's rule set, read before or after the code per the profile."""
    first = profile.final_before_exec
    if profile.upstream_parser:
        return "2fb46cc", upstream_resolution, first
    return "fixed", parser.resolve_final, first


def upstream_resolution(
    response: str, env: Mapping[str, Any], *, render: Callable[[str], str] | None = None
) -> FinalResolution:
    """Upstream's rule: the response ends the run if ``is_final`` and ``parse_response`` agree."""
    if parser.is_final(response):
        return FinalResolution(parser.parse_response(response, env, render=render), None)
    return FinalResolution(None, None)
