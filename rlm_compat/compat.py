"""Which released API's meaning applies where 2fb46cc and recursive-llm 0.5.0 disagree.

The same names mean different things in the two releases of ysz/recursive-llm people use: in
2fb46cc (0.1.0) ``max_depth=5`` counts RLM levels and ``llm_query(prompt, model)`` takes a
model second; in PyPI's 0.5.0 ``max_depth=1`` counts sub-call capability and
``llm_query(query, context, model)`` takes a sub-context second, FINAL must be the whole response,
and ``stats`` describe the latest run only. Code written for one breaks quietly on the other, so
the choice is explicit and made once: an :class:`ApiSemantics` preset, plain frozen data, passed
as ``RLM(..., api="0.5")`` (or ``$RLM_COMPAT_API``). 2fb46cc's meaning stays the default.

The preset is orthogonal to the behaviour :class:`~rlm_compat.profiles.Profile`: a profile says
whether 2fb46cc's *defects* are reproduced, the preset says which release's *contract* applies.
Security holes are never part of either.

A preset is its release's *data*, registered by that release's module (:mod:`rlm_compat._releases`:
``r2fb46cc``, ``r050``), which also holds its behaviour; the class is
:mod:`rlm_compat._releases.contract`'s, re-exported here where users import it. Who reads the
fields: :mod:`rlm_compat.dropin`
(``module_renames``) and :class:`rlm_compat._releases.Release`, the object the RLM's settings
select (``settings.release``) for every other field; the engine, the facade and the
:class:`~rlm_compat.repl.REPLExecutor` ask the release, never the fields.
"""

from __future__ import annotations

import os

from ._releases import ApiSemantics, Release, select_release
from .errors import ConfigurationError

__all__ = ["API_ENV", "ApiSemantics", "Release", "resolve_api", "select_release"]

API_ENV = "RLM_COMPAT_API"


def resolve_api(api: str | ApiSemantics | None) -> ApiSemantics:
    """A preset from a name, a preset, or ``None`` (``$RLM_COMPAT_API``, else 2fb46cc's)."""
    if isinstance(api, ApiSemantics):
        return api
    if api is None:
        api = os.environ.get(API_ENV) or "2fb46cc"
    if not isinstance(api, str):
        raise ConfigurationError(f"api must be '2fb46cc', '0.5' or an ApiSemantics, not {type(api).__name__}")
    return ApiSemantics.named(api)
