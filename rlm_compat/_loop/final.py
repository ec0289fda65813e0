"""How a node's run ends: the callable ``FINAL`` / ``FINAL_VAR`` box and one resolver per rule set.

Three rule sets decide whether a reply ends a node: the fixed parser (profile ``fixed``), 2fb46cc's
``is_final`` + ``parse_response`` (profile switch ``upstream_parser``) and 0.5.0's standalone
directive (the 0.5.0 release, whatever the profile). :func:`choose_resolver` asks the settings'
:class:`~rlm_compat._releases.Release` for one when the engine is built; the loop then only
asks it what a reply means, whether to ask before or after the code ran, and whether a failed
step's directive is withheld.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .. import parser as _parser
from .._releases import Release
from ..errors import StepFailure
from ..fences import fenced_blocks
from ..parser import FinalResolution
from ..profiles import Profile

__all__ = ["NOTHING", "WITHHELD", "WITHHOLDING", "FinalBox", "FinalResolver", "Outcome", "choose_resolver"]

Render = Callable[[str], str]

WITHHELD = (
    "The code in this reply raised an error, so its FINAL / FINAL_VAR did not end the run. "
    "Fix the error, then give the final answer again."
)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a reply comes to after its step: an ``answer`` that ends the node (``method``: how it
    was given, for the record), else ``feedback`` for the model (a parse's advice, or
    :data:`WITHHELD`), or neither."""

    answer: str | None = None
    method: str = ""
    feedback: str | None = None


NOTHING = Outcome()
WITHHOLDING = Outcome(feedback=WITHHELD)


class FinalBox:
    """Where the REPL's callable ``FINAL`` / ``FINAL_VAR`` leave the answer for the loop.

    The texts arrive already made on the sandbox's side (host function kinds ``answer`` and
    ``answer_var``): a model-defined ``__str__`` never runs here.
    """

    def __init__(self, env: Mapping[str, Any]) -> None:
        self._env = env
        self.answer: str | None = None

    def final(self, text: str) -> None:
        """FINAL(value): end the run after this step with ``str(value)``."""
        if self.answer is None:
            self.answer = text

    def final_var(self, name: Any, text: str | None) -> None:
        """FINAL_VAR(name): end the run after this step with ``str(env[name])``."""
        if text is None:
            key = name if isinstance(name, str) else repr(name)
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

    def withholds(self, response: str, failure: StepFailure) -> bool:
        """Whether a failed step's FINAL / FINAL_VAR is withheld (profile fixed; docs/parser.md).

        Decided from how the step failed (:class:`~rlm_compat.errors.StepFailure`), never from
        its text. Not when the directive itself is what failed, after the code before it ran (the
        callable FINAL_VAR handed a value, or no callable at all under ``minimal_env``), and not
        when the reply is prose rather than code: no fence line, and the whole text did not
        compile, so nothing ran (``I found it.`` then ``FINAL("42")``). Code that raised, fenced
        or not, and code the policy refused, are withheld.
        """
        if self.first or failure.directive:
            return False
        return not (failure.stage == "syntax" and fenced_blocks(response) is None)

    def __repr__(self) -> str:
        return f"FinalResolver({self.name!r}, first={self.first})"


def choose_resolver(profile: Profile, release: Release) -> FinalResolver:
    """The rule set the release picks for this profile (:meth:`Release.final_rule`)."""
    rule = release.final_rule(profile)
    return FinalResolver(rule.name, rule.rule, first=rule.first, method=release.api.parsed_final_method)
