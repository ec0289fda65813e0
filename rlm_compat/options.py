"""Sort ``RLM(**kwargs)``: ours, the model call's, or a mistake — never a silent pass-through.

2fb46cc forwarded every unknown keyword argument to ``litellm.acompletion``. That is how a
``temperature=0`` reached the model, and also how ``max_total_calls=10`` (a budget in
recursive-llm 0.5.0) or a typo (``max_iteration=5``) vanished into a provider call that ignored it:
the user who asked for a limit ran without one and was never told. Here each leftover keyword is
classified:

- a model-call option (:data:`PROVIDER_OPTIONS`, the OpenAI chat-completions parameters and
  litellm's common ones, or any named parameter of ``litellm.acompletion``): forwarded, as before;
- ``provider_options={...}``: the documented way to pass anything else (provider-specific
  settings such as ``vertex_project``): forwarded verbatim, unchecked;
- ``api=...``: the :class:`~rlm_compat.compat.ApiSemantics` preset;
- a recursive-llm 0.5.0 option (every one is an ``RLM`` parameter here) passed per model call,
  where it cannot act: :class:`UnsupportedOptionError`;
- a retry count for the provider SDK (litellm's ``num_retries``, a per-call ``max_retries``), even
  inside ``provider_options``: :class:`UnsupportedOptionError` — the RLM makes its retries itself,
  each attempt a counted, budgeted, recorded call, and SDK retries behind it would be invisible;
- anything else: forwarded as 2fb46cc did (litellm knows many provider-specific names no static
  list has, so refusing them would break working drop-in code), with an
  :class:`UnknownOptionWarning` naming each argument and its closest known name; passing it inside
  ``provider_options`` says "I mean it" and silences the warning.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ._releases import r050, select_release
from .compat import ApiSemantics, resolve_api
from .errors import ConfigurationError, UnknownOptionWarning, UnsupportedOptionError
from .settings import PARAMETERS

__all__ = [
    "OWN_OPTIONS",
    "PROVIDER_OPTIONS",
    "PROVIDER_OPTIONS_KEYWORD",
    "RELEASE_050_OPTIONS",
    "RLMOptions",
    "check_call_options",
    "split_rlm_options",
]

PROVIDER_OPTIONS_KEYWORD = "provider_options"
API_KEYWORD = "api"

OWN_OPTIONS: frozenset[str] = frozenset(PARAMETERS)
"""``RLM.__init__``'s own parameters (they never reach this module; listed for "did you mean"),
derived from :data:`rlm_compat.settings.PARAMETERS`."""

PROVIDER_OPTIONS: frozenset[str] = frozenset(
    {
        # OpenAI chat-completions request parameters
        "temperature",
        "top_p",
        "n",
        "stream",
        "stream_options",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "user",
        "response_format",
        "seed",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "service_tier",
        "store",
        "metadata",
        "modalities",
        "audio",
        "prediction",
        "web_search_options",
        "functions",
        "function_call",
        # litellm's own, commonly passed through RLM
        "timeout",
        "api_version",
        "base_url",
        "extra_headers",
        "headers",
        "extra_body",
        "drop_params",
        "custom_llm_provider",
        "mock_response",
        "caching",
        "fallbacks",
        "thinking",
        "deployment_id",
    }
)
"""Keywords forwarded to every model call without a question (checked against litellm's
signature in the tests; names outside it are litellm's ``**kwargs`` it documents)."""

RELEASE_050_OPTIONS: Mapping[str, str] = select_release(r050.PRESET).options(PARAMETERS)
"""recursive-llm 0.5.0's ``RLM`` keywords and what each one does (derived from
:data:`rlm_compat.settings.PARAMETERS`). This build's ``RLM`` takes every one of them as a
parameter; passed per model call (``complete(..., max_retries=3)``) one is refused with this text."""


SDK_RETRY_OPTIONS: frozenset[str] = frozenset({"num_retries", "max_retries"})
"""Model-call options that would make litellm or the provider SDK retry behind the RLM's back."""

_SET_BY_RLM = frozenset({"model", "messages", "api_key"})


@dataclasses.dataclass(frozen=True)
class RLMOptions:
    """The sorted leftovers: the API preset and what every model call receives."""

    api: ApiSemantics
    model_call: dict[str, Any]

    def unpack(self) -> tuple[ApiSemantics, dict[str, Any]]:
        """``(api, model_call)``, for one-line assignment in ``RLM.__init__``."""
        return self.api, self.model_call


def split_rlm_options(extra: Mapping[str, Any], *, caller: str = "RLM()") -> RLMOptions:
    """Classify ``RLM(**extra)`` (called by ``RLM.__init__``: warnings point at its caller)."""
    remaining = dict(extra)
    api = resolve_api(remaining.pop(API_KEYWORD, None))
    verbatim = remaining.pop(PROVIDER_OPTIONS_KEYWORD, None)
    model_call = check_call_options(remaining, api=api, caller=caller, stacklevel=4)
    if verbatim is not None:
        if not isinstance(verbatim, Mapping) or not all(isinstance(k, str) for k in verbatim):
            raise ConfigurationError(
                f"{caller}: {PROVIDER_OPTIONS_KEYWORD} must be a dict of option name -> value, "
                f"not {type(verbatim).__name__}"
            )
        _refuse_sdk_retries(verbatim, f"{caller} {PROVIDER_OPTIONS_KEYWORD}")
        model_call.update(verbatim)
    return RLMOptions(api=api, model_call=model_call)


def check_call_options(
    options: Mapping[str, Any],
    *,
    api: ApiSemantics | None = None,
    caller: str = "complete()",
    stacklevel: int = 2,
) -> dict[str, Any]:
    """What the model call receives: ``options`` whole, once none is refused.

    Raises :class:`UnsupportedOptionError` for options that would otherwise be silently ignored;
    warns (:class:`UnknownOptionWarning`, at ``stacklevel``) about names it does not know. Also
    the check for per-call keywords (``rlm.complete(q, ctx, temperature=0)``).
    """
    api = resolve_api(api)
    _refuse_sdk_retries(options, caller)
    misplaced = sorted(set(options) & set(RELEASE_050_OPTIONS))
    if misplaced:
        described = "; ".join(f"{n}: {RELEASE_050_OPTIONS[n]}" for n in misplaced)
        raise UnsupportedOptionError(
            f"{caller}: recursive-llm 0.5.0's {_names(misplaced)} set on RLM(...), not per model "
            f"call ({described}); pass it when constructing the RLM"
        )
    unknown = sorted(n for n in options if n not in PROVIDER_OPTIONS and not _litellm_accepts(n))
    if unknown:
        known = sorted(
            OWN_OPTIONS
            | PROVIDER_OPTIONS
            | set(RELEASE_050_OPTIONS)
            | {API_KEYWORD, PROVIDER_OPTIONS_KEYWORD}
        )
        hints = [_hint(n, known) for n in unknown]
        warnings.warn(
            UnknownOptionWarning(
                f"{caller} got keyword argument(s) it does not know: {', '.join(hints)}; forwarded "
                f"to the model call as they are. Model-call options it knows are temperature, "
                f"max_tokens, ...; pass a provider-specific option as "
                f"{PROVIDER_OPTIONS_KEYWORD}={{'name': value}} to say it is meant"
            ),
            stacklevel=stacklevel,
        )
    return dict(options)


def _refuse_sdk_retries(options: Mapping[str, Any], caller: str) -> None:
    refused = sorted(set(options) & SDK_RETRY_OPTIONS)
    if refused:
        raise UnsupportedOptionError(
            f"{caller}: {_names(refused)} refused: retries are the RLM's own, each attempt a counted "
            "call in its stats, budget and trajectory; use RLM max_retries instead, set once as "
            "RLM(max_retries=N, retry_backoff_seconds=S)"
        )


def _names(names: Iterable[str]) -> str:
    listed = list(names)
    return (
        ("option " if len(listed) == 1 else "options ")
        + ", ".join(repr(n) for n in listed)
        + (" is" if len(listed) == 1 else " are")
    )


def _hint(name: str, known: list[str]) -> str:
    if name in _SET_BY_RLM:
        return f"{name!r} (set by the RLM itself for every call)"
    match = _close(name, [k for k in known if k != name])
    return f"{name!r} (did you mean {match[0]!r}?)" if match else repr(name)


def _close(name: str, known: list[str]) -> list[str]:
    return difflib.get_close_matches(name, known, n=1, cutoff=0.75)


def _litellm_accepts(name: str) -> bool:
    """Whether ``litellm.acompletion`` names ``name`` as a parameter (imports litellm: rare path)."""
    try:
        acompletion = importlib.import_module("litellm").acompletion
        parameters = inspect.signature(acompletion).parameters
    except Exception:  # litellm missing or unintrospectable: only the static list counts
        return False
    if name in _SET_BY_RLM:
        return False
    parameter = parameters.get(name)
    return parameter is not None and parameter.kind is not inspect.Parameter.VAR_KEYWORD
