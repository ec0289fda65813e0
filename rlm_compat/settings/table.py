"""The options table: :class:`Settings` (the kept keywords), :data:`FOLDED` (the folded ones), and
what is derived from them (:data:`PARAMETERS`, :data:`RECORDED`, :func:`build_settings`)."""

from __future__ import annotations

import dataclasses
import math
import operator
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar, overload

from .._releases import ApiSemantics, Release, r050, select_release
from .._releases.r050 import DEFAULT_SNAPSHOT_BYTES, check_snapshot_bytes
from ..clients import model_window
from ..custom_tools import Tool, parse_tools
from ..errors import ConfigurationError
from ..profiles import Profile, resolve_profile
from ..record.budget import RunBudget
from ..record.run import Observer
from ..retry import RetryPolicy
from ..sandbox import CONTEXT_SECONDS_PER_GB, ISOLATIONS, Limits, ReplConfig, WorkerResourceLimits
from .declare import (
    RECORD_VALUE,
    REQUIRED,
    Context,
    Flag,
    Parameter,
    at_least,
    callable_or_none,
    integer,
    known_prompt_version,
    model_name,
    option,
    or_none,
    positive_seconds,
    release_default,
    within_release_limits,
)

__all__ = ["FOLDED", "KEPT", "PARAMETERS", "RECORDED", "Budget", "Setting", "Settings", "build_settings"]

_050 = r050.NAME
_T = TypeVar("_T")


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {value!r}")
    return value


def _fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigurationError(f"{name} must be a number in (0, 1], not {value!r}")
    return float(value)


def _window(value: Any, ctx: Context) -> int | None:
    """A window given, or with compaction on, litellm's for the model (ConfigurationError if none)."""
    if value is not None:
        return integer(value, 1, ctx.name)
    if not ctx.values["compaction"]:
        return None
    window = model_window(ctx.values["model"])
    if window is None:
        raise ConfigurationError(
            f"compaction=True needs the model's input window: litellm does not know "
            f"{ctx.values['model']!r}; give context_window_tokens=N"
        )
    return window


def _timeout(settings: Settings) -> float | None:
    timeout = settings.repl.timeout
    return None if math.isinf(timeout) else timeout


@dataclasses.dataclass(frozen=True)
class Budget:
    """The ``max_total_*`` limits of one run's whole tree (None: unlimited), validated once."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_elapsed_seconds: float | None = None

    def __post_init__(self) -> None:
        self.start()  # RunBudget's checks, once, here

    def start(self, parent: RunBudget | None = None, scope: str = "run") -> RunBudget:
        """A fresh :class:`RunBudget` for one run (or ``scope="session"``: a persistent
        session), its clock started now; ``parent``: the session's budget, charged too."""
        return RunBudget(**dataclasses.asdict(self), parent=parent, scope=scope)

    def start_session(self) -> RunBudget:
        """A persistent session's budget over all its calls."""
        return self.start(scope="session")


_SESSION_BUDGET_KEYS = ("max_calls", "max_tokens", "max_cost_usd")


def _session_budget(value: Any, ctx: Context) -> Budget | None:
    """``session_budget``: None, or a dict of some of :data:`_SESSION_BUDGET_KEYS`, only with
    ``persistent=True`` (a call that is not a session's has nothing to share it with)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not set(value) <= set(_SESSION_BUDGET_KEYS):
        raise ConfigurationError(
            f"{ctx.name} must be None or a dict of {', '.join(_SESSION_BUDGET_KEYS)}, not {value!r}"
        )
    if not ctx.values.get("persistent"):
        raise ConfigurationError(f"{ctx.name} needs persistent=True: it is the budget of a session's calls")
    return Budget(**value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    """What an RLM node runs with; ``depth`` is the node's level (the constructor's ``_current_depth``).

    The fields declared with :func:`option` are ``RLM`` keywords kept as given (after their
    check); the others are built from the :data:`FOLDED` keywords.
    """

    model: str = option(
        "the model of the root RLM",
        "str",
        REQUIRED,
        positional=True,
        check=model_name,
        flag=Flag("model", required=True),
    )
    recursive_model: str = option(
        "the model of child RLMs and plain sub-calls (None: model)",
        "str | None",
        positional=True,
        check=lambda value, ctx: value or ctx.values["model"],
        flag=Flag("model"),
    )
    api_base: str | None = option(
        "the provider's (OpenAI-compatible) base URL", "str | None", positional=True, flag=Flag("model")
    )
    api_key: str | None = option(
        "the provider's key (default: the provider's usual environment variable; never recorded)",
        "str | None",
        positional=True,
        record=False,
        flag=Flag("model"),
    )
    max_depth: int = option(
        "how deep RLMs may nest (None: the API preset's, 5 RLM levels; under api='0.5' 1, what a "
        "run may call)",
        "int | None",
        positional=True,
        check=release_default(lambda r: r.api.max_depth_default, at_least(0)),
        flag=Flag("loop"),
    )
    max_iterations: int = option(
        "model calls of one node before MaxIterationsError",
        "int",
        30,
        positional=True,
        check=within_release_limits,
        flag=Flag("loop"),
    )
    recursive_max_iterations: int | None = option(
        "model calls of one child RLM before MaxIterationsError (None: max_iterations)",
        "int | None",
        check=or_none(within_release_limits),
        child=lambda s, value: {} if value is None else {"max_iterations": value},
        flag=Flag("loop"),
    )
    recursive_repl_timeout: float | None = option(
        "seconds one REPL step of a child RLM may run (None: repl_timeout), so the steps of "
        "sub-tasks over smaller pieces can be held shorter than the root's",
        "float | None",
        check=or_none(positive_seconds),
        child=lambda s, value: (
            {} if value is None else {"repl": dataclasses.replace(s.repl, timeout=value, timeout_per_gb=0.0)}
        ),
        flag=Flag("loop"),
    )
    prompt_version: str | None = option(
        "which release's exact system prompt: cc7a826, 2fb46cc or 0.5.0 (None: the API preset's, "
        "cc7a826 or under api='0.5' 0.5.0)",
        "str | None",
        record=lambda s: s.effective_prompt_version,
        check=known_prompt_version,
        flag=Flag("loop"),
    )
    max_concurrent_subcalls: int = option(
        "how many model calls of one batched sub-call run at once (None: the preset's, 16; 4 "
        "under api='0.5')",
        "int | None",
        release=_050,
        check=release_default(lambda r: r.api.max_concurrent_subcalls_default, at_least(1)),
        flag=Flag("loop"),
    )
    repl_max_snapshot_bytes: int = option(
        "checked and recorded: in 0.5.0 it bounds the parent's copy of the REPL state; here an "
        "RLM's state never leaves its worker (what a step sends back is bounded by "
        "limits.reply_bytes)",
        "int | None",
        release=_050,
        check=lambda value, ctx: check_snapshot_bytes(
            ctx.name, DEFAULT_SNAPSHOT_BYTES if value is None else value
        ),
    )
    capture_trajectory_content: bool = option(
        "whether trajectory events keep prompts and answers (None: the preset's; False under api='0.5')",
        "bool | None",
        release=_050,
        check=release_default(lambda r: r.api.capture_trajectory_content_default, lambda v, ctx: bool(v)),
        flag=Flag(
            "output",
            name="--redact-trajectory",
            const=False,
            help="the trajectory keeps each prompt's and answer's length, not its text",
        ),
    )
    final_answer_validator: Callable[[str], str | None] | None = option(
        "a check that may reject the root's final answer: None accepts, a reason is shown to the "
        "model, which goes on (recorded: whether one is set)",
        "Callable[[str], str | None] | None",
        release=_050,
        record=lambda s: s.final_answer_validator is not None,
        check=callable_or_none,
        child=lambda s, value: {"final_answer_validator": None},
    )
    custom_tools: tuple[Tool, ...] = option(
        "the user's functions and data in each REPL (rlms' shape: name -> callable, plain value, or "
        "{'tool': ..., 'description': ...}); functions run in the host, called with plain data "
        "(docs/tools.md)",
        "Mapping[str, Any] | None",
        record=lambda s: [tool.record(keep_value=s.capture_trajectory_content) for tool in s.custom_tools],
        check=lambda value, ctx: parse_tools(value, ctx.name),
        child=lambda s, value: {"custom_tools": s.custom_sub_tools},
    )
    custom_sub_tools: tuple[Tool, ...] = option(
        "the tools of child RLMs (recursive_llm / rlm_query; None: custom_tools, as rlms; {}: none); "
        "plain model calls (llm_query) have no REPL and no tools",
        "Mapping[str, Any] | None",
        record=lambda s: [tool.name for tool in s.custom_sub_tools],
        check=lambda value, ctx: (
            ctx.values["custom_tools"] if value is None else parse_tools(value, ctx.name)
        ),
    )
    persistent: bool = option(
        "complete() calls share one REPL session: each call's context kept as context_N, each "
        "finished call as history_N, variables kept; one call at a time; close() ends it "
        "(rlms' keyword; docs/sessions.md)",
        "bool",
        False,
        check=lambda value, ctx: _flag(value, ctx.name),
        child=lambda s, value: {"persistent": False},
    )
    session_budget: Budget | None = option(
        "a persistent session's budget over all its calls, a dict of max_calls, max_tokens and "
        "max_cost_usd (each optional); every call's own max_total_* still applies (docs/sessions.md)",
        "dict | None",
        None,
        check=lambda value, ctx: _session_budget(value, ctx),
        record=lambda s: None if s.session_budget is None else dataclasses.asdict(s.session_budget),
        child=lambda s, value: {"session_budget": None},
    )
    compaction: bool = option(
        "summarize the root's earlier steps when its messages near the model's window (rlms' "
        "keyword; the REPL is untouched; docs/sessions.md)",
        "bool",
        False,
        check=lambda value, ctx: _flag(value, ctx.name),
        child=lambda s, value: {"compaction": False},
    )
    compaction_threshold_pct: float = option(
        "the share of the window at which compaction starts (rlms' default, 0.85)",
        "float",
        0.85,
        check=lambda value, ctx: _fraction(value, ctx.name),
    )
    context_window_tokens: int | None = option(
        "the root model's input window in tokens, for compaction (None: litellm's figure for the "
        "model; required with compaction=True for a model litellm does not know)",
        "int | None",
        check=_window,
    )
    trajectory_path: str | os.PathLike[str] | None = option(
        "where each run's events are written as JSON lines (docs/trajectory.md)",
        "str | os.PathLike[str] | None",
        record=False,
        flag=Flag("output", name="--trajectory"),
    )

    depth: int
    api: ApiSemantics
    llm_kwargs: Mapping[str, Any]
    repl: ReplConfig
    budget: Budget
    retry: RetryPolicy
    repl_resource_limits: WorkerResourceLimits
    observers: tuple[Observer, ...]

    @property
    def profile(self) -> Profile:
        return self.repl.profile

    @property
    def node_model(self) -> str:
        """The model this node's loop calls (children run on the recursive model)."""
        return self.model if self.depth == 0 else self.recursive_model

    @property
    def release(self) -> Release:
        """The release this RLM follows where 2fb46cc and 0.5.0 differ (selected by ``api``)."""
        return select_release(self.api)

    @property
    def effective_prompt_version(self) -> str:
        return self.prompt_version or self.api.prompt_version

    def child(self) -> Settings:
        """One level deeper on the recursive model, each option's ``child`` change applied."""
        changes: dict[str, Any] = {"model": self.recursive_model, "depth": self.depth + 1}
        for name, parameter in KEPT.items():
            if parameter.child is not None:
                changes.update(parameter.child(self, getattr(self, name)))
        return dataclasses.replace(self, **changes)


KEPT: Mapping[str, Parameter] = {
    f.name: f.metadata["parameter"] for f in dataclasses.fields(Settings) if "parameter" in f.metadata
}
"""The keywords kept as :class:`Settings` fields of the same name, declared with :func:`option`."""


FOLDED: Mapping[str, Parameter] = {
    "_current_depth": Parameter(
        "this RLM's depth in its tree (recorded as depth)", "int", 0, positional=True
    ),
    "profile": Parameter(
        "the behaviour profile: fixed (default, or $RLM_COMPAT_PROFILE), upstream, an ablation "
        "spec or a Profile",
        "str | Profile | None",
        record=lambda s: s.profile.name,
        flag=Flag("loop"),
    ),
    "client": Parameter(
        "where model calls go, an LLMClient (default: litellm through rlm_compat.core.litellm)",
        "LLMClient | None",
    ),
    "repl_timeout": Parameter(
        "seconds one REPL step may run (None: no limit); not given: 5, plus in profile fixed 30 s "
        "per 10^9 characters of the node's context (CONTEXT_SECONDS_PER_GB; recorded: the root's)",
        "float | None",
        5,
        record=_timeout,
        flag=Flag("loop"),
    ),
    "max_output_chars": Parameter(
        "the most REPL output shown to the model per step",
        "int",
        2000,
        record=lambda s: s.repl.max_output_chars,
        flag=Flag("loop"),
    ),
    "isolation": Parameter(
        "where model code runs: process (a killable, hardened worker; the default of both profiles) "
        "or inline (this process, as 2fb46cc ran it); default $RLM_COMPAT_ISOLATION, else process "
        "(inline only under a profile with the inline_by_default switch on)",
        "str | None",
        record=lambda s: str(s.repl.isolation),
        flag=Flag("loop", choices=ISOLATIONS),
    ),
    "limits": Parameter("the REPL's resource limits, a Limits", "Limits | None"),
    "repl_config": Parameter(
        "the REPL's whole configuration, a ReplConfig (instead of the loose REPL keywords)",
        "ReplConfig | None",
    ),
    "on_event": Parameter("a callback for each trajectory event", "Observer | None"),
    "event_handler": Parameter("a callback for each trajectory event", "Observer | None", release=_050),
    "observers": Parameter("callbacks for each trajectory event", "Iterable[Observer]", ()),
    "completion_handler": Parameter(
        "an async callable called instead of litellm.acompletion (same keywords, same response shape)",
        "Callable[..., Awaitable[Any]] | None",
        release=_050,
    ),
    "repl_memory_limit_mb": Parameter(
        "the REPL worker's memory limit in MB (here: limits=Limits(memory_mb=...))",
        "int | None",
        release=_050,
        flag=Flag("loop", name="--memory-mb"),
    ),
    "repl_cpu_time_limit_seconds": Parameter(
        "the REPL worker's CPU limit (here: limits=Limits(cpu_seconds=...))", "int | None", release=_050
    ),
    "repl_max_open_files": Parameter(
        "the REPL worker's file limit (here: limits=Limits(open_files=...))", "int | None", release=_050
    ),
    "max_total_calls": Parameter(
        "a budget: the most model calls of one run's whole tree",
        "int | None",
        release=_050,
        record=lambda s: s.budget.max_calls,
        flag=Flag("budget", name="--max-calls"),
    ),
    "max_total_tokens": Parameter(
        "a budget: the most tokens of one run's whole tree",
        "int | None",
        release=_050,
        record=lambda s: s.budget.max_tokens,
        flag=Flag("budget", name="--max-tokens"),
    ),
    "max_total_cost_usd": Parameter(
        "a budget: the most estimated cost (USD, litellm's estimate) of one run's whole tree",
        "float | None",
        release=_050,
        record=lambda s: s.budget.max_cost_usd,
        flag=Flag("budget", name="--max-cost"),
    ),
    "max_elapsed_seconds": Parameter(
        "a budget: the longest wall time of one run",
        "float | None",
        release=_050,
        record=lambda s: s.budget.max_elapsed_seconds,
        flag=Flag("budget", name="--max-seconds"),
    ),
    "max_retries": Parameter(
        "retries of a transient provider failure, each a counted, budgeted, recorded call "
        "(None: the preset's, 2; 0 under api='0.5')",
        "int | None",
        release=_050,
        record=lambda s: s.retry.max_retries,
        flag=Flag("model"),
    ),
    "retry_backoff_seconds": Parameter(
        "the first delay between retries, doubled per attempt, or the provider's Retry-After when "
        "longer (None: the preset's, 0.5 s; 1 s under api='0.5')",
        "float | None",
        release=_050,
        record=lambda s: s.retry.backoff_seconds,
        flag=Flag("model"),
    ),
}
"""The keywords folded into a compound setting (or, ``client`` and ``completion_handler``, used
by the facade alone); their handling is :func:`build_settings`'s ``_fold_*`` functions."""


def _signature_order() -> dict[str, Parameter]:
    rows = {**KEPT, **FOLDED}
    positional = ("model", "recursive_model", "api_base", "api_key", "max_depth", "max_iterations")
    ordered = {name: rows[name] for name in (*positional, "_current_depth")}
    ordered.update((name, row) for name, row in rows.items() if name not in ordered)
    return ordered


PARAMETERS: Mapping[str, Parameter] = _signature_order()
"""Every keyword ``RLM.__init__`` takes (``**llm_kwargs`` aside), in signature order: the
:class:`Settings` fields declared with :func:`option` and the :data:`FOLDED` rows."""

RECORDED: Mapping[str, Callable[[Settings], Any]] = {
    name: operator.attrgetter(name) if p.record is RECORD_VALUE else p.record
    for name, p in PARAMETERS.items()
    if p.record is not None
}
"""The run record's ``config``: keyword -> how its kept value is read from :class:`Settings`."""


def build_settings(
    *, api: ApiSemantics, llm_kwargs: Mapping[str, Any], keywords: Mapping[str, Any]
) -> Settings:
    """Check every keyword once (ConfigurationError naming it), the preset filling defaults.

    ``keywords``: the constructor's keywords by name (those not given take their defaults),
    ``client`` and ``completion_handler`` aside.
    """
    given = {name: keywords.get(name, p.default) for name, p in PARAMETERS.items()}
    release = select_release(api)
    values: dict[str, Any] = {}
    for name, parameter in KEPT.items():
        check = parameter.check
        values[name] = given[name] if check is None else check(given[name], Context(name, release, values))
    depth = integer(given["_current_depth"], 0, "_current_depth")
    resources = _resource_limits(
        given["repl_memory_limit_mb"], given["repl_cpu_time_limit_seconds"], given["repl_max_open_files"]
    )
    integer(given["max_output_chars"], release.least_limit, "max_output_chars")
    repl = _repl_config(given, resources, timeout_given="repl_timeout" in keywords)
    budget = Budget(
        given["max_total_calls"],
        given["max_total_tokens"],
        given["max_total_cost_usd"],
        given["max_elapsed_seconds"],
    )
    max_retries = given["max_retries"]
    integer(0 if max_retries is None else max_retries, 0, "max_retries")  # RetryPolicy re-checks
    return Settings(
        **values,
        depth=depth,
        api=api,
        llm_kwargs=dict(llm_kwargs),
        repl=repl,
        budget=budget,
        retry=release.retry_policy(max_retries, given["retry_backoff_seconds"]),
        repl_resource_limits=resources,
        observers=_observers(given["on_event"], given["event_handler"], given["observers"]),
    )


def _observers(on_event: Any, event_handler: Any, observers: Iterable[Observer]) -> tuple[Observer, ...]:
    handlers = tuple(h for h in (on_event, event_handler, *observers) if h is not None)
    for handler in handlers:
        if not callable(handler):
            raise ConfigurationError(f"event observers must be callables, not {handler!r}")
    return handlers


def _repl_config(
    given: Mapping[str, Any], resources: WorkerResourceLimits, *, timeout_given: bool
) -> ReplConfig:
    """``repl_config`` whole, or one made of the loose REPL keywords (0.5.0's limits folded in).

    Profile ``fixed`` (and its ablations, ``fixed-with:...``) without a ``repl_timeout`` lets the
    step timeout grow with each node's context (:data:`~rlm_compat.config.CONTEXT_SECONDS_PER_GB`):
    a big context fails for its size otherwise. Profile ``upstream`` and its ablations keep
    2fb46cc's fixed 5 s (fidelity); a timeout the user gives (or a whole ``repl_config``) is kept.
    """
    whole, limits = given["repl_config"], given["limits"]
    if resources.configured:
        if whole is not None:
            raise ConfigurationError(
                "repl_memory_limit_mb / repl_cpu_time_limit_seconds / repl_max_open_files cannot "
                "be combined with repl_config=: set them in its limits (Limits(memory_mb=..., "
                "cpu_seconds=..., open_files=...))"
            )
        limits = resources.to_limits(limits)
    if whole is None:
        profile = resolve_profile(given["profile"])
        grows = not timeout_given and profile.name.partition(":")[0] in ("fixed", "fixed-with")
        return ReplConfig(
            profile=profile,
            timeout=given["repl_timeout"],
            max_output_chars=given["max_output_chars"],
            isolation=given["isolation"],
            limits=Limits() if limits is None else limits,
            timeout_per_gb=CONTEXT_SECONDS_PER_GB if grows else 0.0,
        )
    if not isinstance(whole, ReplConfig):
        raise ConfigurationError(f"repl_config must be a ReplConfig, not {type(whole).__name__}")
    return whole


def _resource_limits(memory_mb: Any, cpu_seconds: Any, open_files: Any) -> WorkerResourceLimits:
    """0.5.0's ``repl_*`` limit keywords, checked; an error names the keyword the caller used."""
    try:
        return WorkerResourceLimits(
            memory_mb=memory_mb, cpu_time_seconds=cpu_seconds, max_open_files=open_files
        )
    except ConfigurationError as exc:
        text = str(exc)
        for field, keyword in _RESOURCE_KEYWORDS:
            if text.startswith(field):
                text = keyword + text[len(field) :]
        raise ConfigurationError(text) from None


_RESOURCE_KEYWORDS = (
    ("memory_mb", "repl_memory_limit_mb"),
    ("cpu_time_seconds", "repl_cpu_time_limit_seconds"),
    ("max_open_files", "repl_max_open_files"),
)


class Setting(Generic[_T]):
    """A read-only attribute of the facade showing one of its :class:`Settings` (``rlm.max_depth``)."""

    def __init__(self, read: Callable[[Settings], _T]) -> None:
        self._read = read
        self._name = "setting"

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Setting[_T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> _T: ...

    def __get__(self, obj: Any, owner: type | None = None) -> _T | Setting[_T]:
        return self if obj is None else self._read(obj.settings)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(
            f"RLM settings are frozen: {self._name} is fixed when the RLM is made; make a new "
            f"RLM({self._name}=...) instead"
        )
