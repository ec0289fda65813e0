"""What a request's ``model`` names: an RLM over a litellm root model, with its settings.

Two ways to name one (docs/serve.md): a per-model config file (``[models.NAME]`` tables, any name),
and the scheme ``rlm:<litellm model>`` for the root models the server was started with (``--model``)
or allowed by glob (``--allow-model``), all with the server's defaults. Nothing here imports
aiohttp or litellm: the registry is plain data, checked when the server starts.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...compat import resolve_api
from ...errors import ConfigurationError
from ...settings import PARAMETERS, build_settings
from ..shared.tool_imports import import_tools
from ..shared.tooling_errors import ToolUsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = ["CLIENTS", "RLM_KEYS", "SCHEME", "SERVER_OWNED", "ModelRegistry", "ModelSpec"]

CLIENTS = ("litellm", "openai-compatible")
"""How a model's calls are made: litellm (any provider it supports), or the lean path for
OpenAI-compatible endpoints (rlm_compat.openai_client; no cost figures)."""

SCHEME = "rlm:"
"""Prefix of the naming scheme: ``rlm:openai/gpt-4o-mini`` is an RLM over ``openai/gpt-4o-mini``."""


SERVER_OWNED = frozenset(
    {
        "model",
        "api_key",
        "_current_depth",
        "trajectory_path",
        "capture_trajectory_content",
        "max_total_calls",
        "max_total_tokens",
        "max_total_cost_usd",
        "max_elapsed_seconds",
    }
)
"""RLM keywords a model table cannot set: the server sets them (the root model, the key from
``api_key_env``, trajectories under ``--trajectory-dir``, the per-run limits a request may lower)."""

RLM_KEYS = frozenset(name for name, row in PARAMETERS.items() if row.plain) - SERVER_OWNED
"""The RLM keywords a served model sets (every keyword of the options table taking plain data,
:data:`SERVER_OWNED` aside): a keyword added to the table is servable without an edit here."""

_DEFAULTS: Mapping[str, Any] = {"profile": "fixed"}
"""A served model's defaults where the server's differ from the RLM's (no ``$RLM_COMPAT_PROFILE``)."""


@dataclass(frozen=True)
class ModelSpec:
    """One servable RLM: its root model and the settings every run of it gets.

    ``rlm``: the RLM keywords of every run (any of :data:`RLM_KEYS`), checked as the RLM checks
    them when the spec is made. ``api_key_env`` names the environment variable holding the
    provider key (read per request, never echoed); None leaves the key to litellm's usual
    variables. ``request_timeout``: seconds per provider request; ``client``: one of
    :data:`CLIENTS`.
    """

    name: str
    model: str
    api_key_env: str | None = None
    request_timeout: float | None = None
    client: str = "litellm"
    rlm: Mapping[str, Any] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    custom_tools: Mapping[str, Any] = field(init=False, repr=False, compare=False)

    @classmethod
    def of(cls, name: str, model: str, **settings: Any) -> ModelSpec:
        """A spec from flat settings, as a ``[models.NAME]`` table has them (RLM keywords mixed in)."""
        own = {key: settings.pop(key) for key in list(settings) if key in _OWN_KEYS}
        return cls(name=name, model=model, **own, rlm=settings)

    def __post_init__(self) -> None:
        if self.client not in CLIENTS:
            raise ToolUsageError(
                f"model {self.name!r}: client must be one of {', '.join(CLIENTS)}, not {self.client!r}"
            )
        for name in ("name", "model"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ToolUsageError(f"model {self.name!r}: {name} must be a non-empty string")
        unknown = sorted(set(self.rlm) - RLM_KEYS)
        if unknown:
            raise ToolUsageError(
                f"model {self.name!r}: unknown key(s) {unknown}; known: {sorted(_OWN_KEYS | RLM_KEYS)}"
            )
        object.__setattr__(self, "rlm", MappingProxyType({**_DEFAULTS, **self.rlm}))
        given: Any = self.tools
        if not isinstance(given, (list, tuple)) or not all(isinstance(t, str) for t in given):
            raise ToolUsageError(f"model {self.name!r}: tools must be a list of '[NAME=]module:function'")
        object.__setattr__(self, "tools", tuple(self.tools))
        try:
            loaded = import_tools(self.tools)
        except ToolUsageError as exc:
            raise ToolUsageError(f"model {self.name!r}: {exc}") from None
        object.__setattr__(self, "custom_tools", MappingProxyType(loaded))

    def check(self) -> ModelSpec:
        """Itself, once its RLM settings pass the checks ``RLM(...)`` makes (done when the server
        starts, not per request)."""
        try:
            keywords = {"model": self.model, **self.rlm, "custom_tools": dict(self.custom_tools)}
            build_settings(api=resolve_api(None), llm_kwargs={}, keywords=keywords)
        except ConfigurationError as exc:
            raise ToolUsageError(f"model {self.name!r}: {exc}") from None
        return self

    def __hash__(self) -> int:
        return hash((self.name, self.model, tuple(sorted(self.rlm.items())), self.tools))

    def api_key(self) -> str | None:
        """The provider key from ``api_key_env`` (an unset variable is a configuration error)."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ToolUsageError(
                f"model {self.name!r}: environment variable {self.api_key_env} (its provider key) is not set"
            )
        return value

    def public(self) -> dict[str, Any]:
        """What ``GET /v1/models`` shows of it: never the key or its variable's value."""
        return {
            "id": self.name,
            "object": "model",
            "created": 0,
            "owned_by": "rlm-compat",
            "rlm": {
                "root_model": self.model,
                "recursive_model": self.rlm.get("recursive_model") or self.model,
                "profile": self.rlm["profile"],
                "max_depth": self.rlm.get("max_depth"),
                "max_iterations": self.rlm.get("max_iterations", PARAMETERS["max_iterations"].default),
                "client": self.client,
                "tools": list(self.custom_tools),
            },
        }


_OWN_KEYS = frozenset(f.name for f in fields(ModelSpec) if f.init) - {"name", "model", "rlm"}


class ModelRegistry:
    """The models a server answers for: named ones from the config file, ``rlm:`` ones from a template."""

    def __init__(
        self,
        named: Iterable[ModelSpec] = (),
        *,
        template: ModelSpec | None = None,
        roots: Iterable[str] = (),
        allow: Iterable[str] = (),
    ) -> None:
        self._named = {spec.name: spec.check() for spec in named}
        self._template = None if template is None else template.check()
        self._roots = list(dict.fromkeys(roots))
        self._allow = list(allow)
        if (self._roots or self._allow) and template is None:
            raise ToolUsageError("rlm: models need a template spec (the server's defaults)")
        if not self._named and not self._roots and not self._allow:
            raise ToolUsageError(
                "no models to serve: give --model LITELLM_MODEL (served as rlm:LITELLM_MODEL) or a "
                "--config file with [models.NAME] tables"
            )

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], **kwargs: Any) -> ModelRegistry:
        """Models from a TOML file of ``[models.NAME]`` tables (keys: ModelSpec's fields)."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ToolUsageError(f"model config {path}: {exc}") from None
        return cls(specs_from_mapping(data, str(path)), **kwargs)

    def names(self) -> list[str]:
        """Every name listed by ``GET /v1/models`` (allowed globs are not listable)."""
        return [*self._named, *(SCHEME + root for root in self._roots)]

    def listed(self) -> list[ModelSpec]:
        """The specs behind :meth:`names`."""
        return [spec for name in self.names() if (spec := self.resolve(name)) is not None]

    def resolve(self, name: str) -> ModelSpec | None:
        """The spec a request's ``model`` names, or None if this server does not serve it."""
        spec = self._named.get(name)
        if spec is not None:
            return spec
        if not name.startswith(SCHEME) or self._template is None:
            return None
        root = name[len(SCHEME) :]
        if not root:
            return None
        if root in self._roots or any(fnmatch.fnmatchcase(root, glob) for glob in self._allow):
            return replace(self._template, name=name, model=root)
        return None

    def uses_litellm(self) -> bool:
        """Whether any model it serves calls through litellm (else the server never imports it)."""
        serves_rlm = self._template is not None and bool(self._roots or self._allow)
        specs = [*self._named.values(), *([self._template] if serves_rlm and self._template else [])]
        return any(spec.client == "litellm" for spec in specs)

    def secret_envs(self) -> list[str]:
        """The variables holding provider keys, for the redactor."""
        specs = [*self._named.values(), *([self._template] if self._template else [])]
        return sorted({s.api_key_env for s in specs if s.api_key_env})


def specs_from_mapping(data: Mapping[str, Any], where: str) -> list[ModelSpec]:
    """``{"models": {NAME: {...}}}`` checked into specs; unknown keys are named."""
    unknown_top = set(data) - {"models"}
    if unknown_top:
        raise ToolUsageError(
            f"{where}: unknown top-level key(s) {sorted(unknown_top)}; expected [models.NAME]"
        )
    models = data.get("models", {})
    if not isinstance(models, dict) or not models:
        raise ToolUsageError(f"{where}: needs at least one [models.NAME] table")
    specs = []
    for name, table in models.items():
        if not isinstance(table, dict):
            raise ToolUsageError(f"{where}: models.{name} must be a table")
        known = _OWN_KEYS | RLM_KEYS | {"model"}
        unknown = set(table) - known
        if unknown:
            raise ToolUsageError(
                f"{where}: models.{name} has unknown key(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        if "model" not in table:
            raise ToolUsageError(f"{where}: models.{name} needs model = '<litellm model>'")
        settings = dict(table)
        try:
            specs.append(ModelSpec.of(name, settings.pop("model"), **settings).check())
        except ToolUsageError as exc:
            raise ToolUsageError(f"{where}: models.{name}: {exc}") from None
    return specs
