"""How a node's run ends: the callable ``FINAL`` / ``FINAL_VAR`` box and one resolver per rule set.

Three rule sets decide whether a reply ends a node: the fixed parser (profile ``fixed``), 2fb46cc's
``is_final`` + ``parse_response`` (profile switch ``upstream_parser``) and 0.5.0's standalone
directive (the 0.5.0 release, whatever the profile). :func:`choose_resolver` asks the settings'
:class:`~rlm_compat._releases.Release` for one when the engine is built; the loop then only
asks it what a reply means, whether to ask before or after the code ran, and whether a failed
step's directive is withheld.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .. import parser as _parser
from .._releases import Release, select_release
from .._releases.contract import ApiSemantics
from ..parser import FinalResolution
from ..profiles import Profile
from ..sandbox import fenced_blocks

__all__ = ["WITHHELD", "FinalBox", "FinalResolver", "choose_resolver"]

Render = Callable[[str], str]

WITHHELD = (
    "The code in this reply raised an error, so its FINAL / FINAL_VAR did not end the run. "
    "Fix the error, then give the final answer again."
)
# profile switch minimal_env: executing the directive itself is what failed
_DIRECTIVE_UNDEFINED = re.compile(r"name 'FINAL(?:_VAR)?' is not defined")
_COMPILE_FAILURE = re.compile(
    r"Error: Execution error: (?:Compilation error: |SyntaxError|IndentationError|TabError)"
)


class FinalBox:
    """Where the REPL's callable ``FINAL`` / ``FINAL_VAR`` leave the answer for the loop.

    The texts arrive already made on the sandbox's side (host function kinds ``answer`` and
    ``answer_var``): a model-defined ``__str__`` never runs here.
    """

    def __init__(self, env: Mapping[str, Any]) -> None:
        self._env = env
        self.answer: str | None = None
        self.missing = False
        """The step's callable FINAL_VAR raised for want of the variable: the step failed at the
        directive itself, after the code before it ran (``FINAL_VAR(answer)`` passes a value)."""

    def final(self, text: str) -> None:
        """FINAL(value): end the run after this step with ``str(value)``."""
        if self.answer is None:
            self.answer = text

    def final_var(self, name: Any, text: str | None) -> None:
        """FINAL_VAR(name): end the run after this step with ``str(env[name])``."""
        if text is None:
            key = name if isinstance(name, str) else repr(name)
            self.missing = True
            raise _parser.missing_variable_error(key, self._env)
        self.final(text)


class FinalResolver:
    """One rule set: what a reply means (``settle``), and when the loop asks.

    ``first``: the reply's directive is settled before its code runs (2fb46cc's order, and 0.5.0's
    standalone directive, which is never run as code); otherwise after, and a failed step's
    directive is withheld (:meth:`withholds`). ``method``: the record's name for a parsed answer
    when the rule set gives none.
    """

    def __init__(
        self,
        name: str,
        rule: Callable[..., FinalResolution],
        *,
        first: bool,
        method: str,
    ) -> None:
        self.name, self._rule, self.first, self.method = name, rule, first, method

    def settle(self, response: str, env: Mapping[str, Any], render: Render) -> FinalResolution:
        """What ``response`` means given the namespace ``env`` (never raises)."""
        return self._rule(response, env, render=render)

    def withholds(self, box: FinalBox, response: str, observation: str) -> bool:
        """Whether a failed step's FINAL / FINAL_VAR is withheld (profile fixed; docs/parser.md).

        Not when the directive itself is what failed, after the code before it ran (the callable
        FINAL_VAR handed a value, or no callable at all under ``minimal_env``), and not when the
        reply is prose rather than code: no fence line, and the whole text did not compile, so
        nothing ran (``I found it.`` then ``FINAL("42")``). Code that raised, fenced or not, is
        withheld.
        """
        if self.first or box.missing or _DIRECTIVE_UNDEFINED.search(observation):
            return False
        return not (fenced_blocks(response) is None and _COMPILE_FAILURE.match(observation))

    def __repr__(self) -> str:
        return f"FinalResolver({self.name!r}, first={self.first})"


def choose_resolver(profile: Profile, api: ApiSemantics | Release) -> FinalResolver:
    """The rule set the release picks for this profile (:meth:`Release.final_rule`)."""
    release = api if isinstance(api, Release) else select_release(api)
    rule = release.final_rule(profile)
    return FinalResolver(rule.name, rule.rule, first=rule.first, method=release.parsed_final_method)
