"""The selected release: what an RLM asks wherever 2fb46cc and recursive-llm 0.5.0 differ.

A :class:`Release` wraps the release's data (an :class:`~rlm_compat.compat.ApiSemantics`,
public and replaceable field by field) and answers the engine's questions about it: which FINAL
rule set, which REPL-namespace extras, which event shape, which retry policy, which messages.
The behaviour itself lives in one module per release (:mod:`.r2fb46cc`, :mod:`.r050`); this
class is the only place that reads the data's switches, so the engine never branches on them.
Where a profile could decide the same thing, ``tests/_releases/test_release_vs_profile.py``
pins which axis does.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from ..parser import FinalResolution
from ..profiles import Profile
from ..retry import RetryPolicy
from . import r050, r2fb46cc
from .contract import ApiSemantics
from .r050_trajectory_shape import ReleaseShaper

__all__ = ["FinalRule", "Release", "select_release"]


@dataclasses.dataclass(frozen=True)
class FinalRule:
    """One FINAL rule set: its name, the rule, and whether it is settled before the code runs."""

    name: str
    rule: Callable[..., FinalResolution]
    first: bool


@dataclasses.dataclass(frozen=True)
class Release:
    """The release an RLM was built for (``Settings.release``), over its data ``api``.

    Only questions that need the release's code or combine its fields are members; a plain
    field is read from ``api`` (``settings.api.stats_per_run``), so a new difference
    between releases is one :class:`~rlm_compat.compat.ApiSemantics` field and its reader.
    """

    api: ApiSemantics

    def final_rule(self, profile: Profile) -> FinalRule:
        """0.5.0's standalone directive whatever the profile; otherwise the profile's rule set."""
        if self.api.standalone_final_only:
            return FinalRule(*r050.final_rule())
        return FinalRule(*r2fb46cc.final_rule(profile))

    def namespace_extras(self) -> dict[str, Any]:
        """Names the release adds to every node's REPL namespace (0.5.0's ``answer`` dict)."""
        return {"answer": r050.answer_dict()} if self.api.answer_object else {}

    def answer_ready(self, published: Any) -> TypeGuard[dict[str, Any]]:
        """Whether the REPL's ``answer`` (0.5.0's dict) ends the run."""
        return self.api.answer_object and r050.answer_ready(published)

    @property
    def repl_shared_names(self) -> tuple[str, ...]:
        """Names the REPL hands back after every step whatever changed (0.5.0's ``answer``)."""
        return ("answer",) if self.api.answer_object else ()

    def offers_query_functions(self, max_depth: int | None) -> bool:
        """0.5.0: a run that may call nothing (``max_depth=0``) gets no query functions."""
        return not (self.api.depth_is_subcall_capability and max_depth == 0)

    def root_exempt(self, depth: int) -> bool:
        """0.5.0's ``max_depth`` bounds what a run may call, so a root run is always allowed."""
        return self.api.depth_is_subcall_capability and depth == 0

    def shaper(self, *, capture: bool, max_retries: int) -> ReleaseShaper | None:
        """The converter of events into the release's trajectory shape (None: rlm_compat's own)."""
        if self.api.trajectory_shape == "0.5":
            return r050.shaper(capture=capture, max_retries=max_retries)
        return None

    def retry_policy(self, max_retries: int | None, backoff_seconds: float | None) -> RetryPolicy:
        """The retry policy, the release's defaults filling what the caller left out."""
        return RetryPolicy(
            self.api.max_retries_default if max_retries is None else max_retries,
            self.api.retry_backoff_default if backoff_seconds is None else backoff_seconds,
        )

    @property
    def least_limit(self) -> int:
        """The smallest ``max_iterations`` / ``max_output_chars`` accepted (0.5.0 refuses 0)."""
        return 1 if self.api.strict_limits else 0

    def max_iterations_message(self, limit: int) -> str:
        return self.api.max_iterations_message.format(limit=limit)

    def leaf_prompt(self, query: str, context: str) -> str:
        """The user message of a plain sub-call asked ``query`` over ``context``."""
        if not context:
            return query
        values = {"query": query, "context": context}
        return re.sub(r"\{(query|context)\}", lambda m: values[m[1]], self.api.leaf_with_context)

    def options(self, parameters: Mapping[str, Any]) -> dict[str, str]:
        """The ``RLM`` keywords this release brought, from the parameter table, with their docs."""
        return {name: p.doc for name, p in parameters.items() if p.release == self.api.release}


@functools.lru_cache(maxsize=32)
def select_release(api: ApiSemantics) -> Release:
    """The :class:`Release` of a preset (one object per distinct preset)."""
    return Release(api)
