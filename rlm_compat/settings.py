"""One frozen :class:`Settings` per RLM, built and validated once from the constructor's arguments.

The loop engine (:mod:`rlm_compat._loop`) reads nothing else: budgets, retries, the REPL's
configuration, the profile and the API preset arrive here checked, and a child RLM is this object
one level deeper (:meth:`Settings.child`), never a copy of the facade. :data:`PARAMETERS` describes
every constructor keyword once; the option tables of :mod:`rlm_compat.options` and the run record's
``config`` (:mod:`rlm_compat.record.run_config`) are derived from it and from the fields here.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar, overload

from ._releases import Release, r050, select_release
from ._releases.r050.executor import DEFAULT_SNAPSHOT_BYTES, check_snapshot_bytes
from .compat import ApiSemantics
from .config import Limits, ReplConfig, WorkerResourceLimits
from .errors import ConfigurationError
from .profiles import Profile, resolve_profile
from .prompts import build_system_prompt
from .record.budget import RunBudget
from .record.run import Observer
from .retry import RetryPolicy

__all__ = ["PARAMETERS", "Budget", "Parameter", "Setting", "Settings", "build_settings"]

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One ``RLM(...)`` keyword: what it does, the release that brought it (None: 2fb46cc or ours),
    and what the run record's ``config`` keeps of it (``record``; None: nothing, e.g. a credential,
    a callable, or a keyword folded into another's record)."""

    doc: str
    release: str | None = None
    record: Callable[[Settings], Any] | None = None


_050 = r050.NAME


def _timeout(settings: Settings) -> float | None:
    timeout = settings.repl.timeout
    return None if math.isinf(timeout) else timeout


PARAMETERS: Mapping[str, Parameter] = {
    "model": Parameter("the model of the root RLM", record=lambda s: s.model),
    "recursive_model": Parameter(
        "the model of child RLMs and plain sub-calls", record=lambda s: s.recursive_model
    ),
    "api_base": Parameter("the provider's base URL", record=lambda s: s.api_base),
    "api_key": Parameter("the provider's key (never recorded)"),
    "max_depth": Parameter("how deep RLMs may nest", record=lambda s: s.max_depth),
    "max_iterations": Parameter(
        "model calls of one node before MaxIterationsError", record=lambda s: s.max_iterations
    ),
    "recursive_max_iterations": Parameter(
        "model calls of one child RLM before MaxIterationsError (None: max_iterations)",
        record=lambda s: s.recursive_max_iterations,
    ),
    "_current_depth": Parameter("this RLM's depth in its tree (recorded as depth)"),
    "profile": Parameter("the behaviour profile: fixed or upstream", record=lambda s: s.profile.name),
    "prompt_version": Parameter("which release's system prompt", record=lambda s: s.effective_prompt_version),
    "client": Parameter("where model calls go (an LLMClient; its type is recorded as client)"),
    "repl_timeout": Parameter("seconds one REPL step may run", record=_timeout),
    "max_output_chars": Parameter(
        "the most REPL output shown to the model per step", record=lambda s: s.repl.max_output_chars
    ),
    "isolation": Parameter("inline or process REPL", record=lambda s: str(s.repl.isolation)),
    "limits": Parameter("the REPL's resource limits"),
    "repl_config": Parameter("the REPL's whole configuration"),
    "on_event": Parameter("a callback for each trajectory event"),
    "observers": Parameter("callbacks for each trajectory event"),
    "trajectory_path": Parameter("where each run's events are written as JSON lines"),
    "repl_max_snapshot_bytes": Parameter(
        "the most REPL state copied back from the worker per step", _050, lambda s: s.repl_max_snapshot_bytes
    ),
    "repl_memory_limit_mb": Parameter(
        "the REPL worker's memory limit (here: limits=Limits(memory_mb=...))", _050
    ),
    "repl_cpu_time_limit_seconds": Parameter(
        "the REPL worker's CPU limit (here: limits=Limits(cpu_seconds=...))", _050
    ),
    "repl_max_open_files": Parameter(
        "the REPL worker's file limit (here: limits=Limits(open_files=...))", _050
    ),
    "max_concurrent_subcalls": Parameter(
        "how many batched sub-calls run at once", _050, lambda s: s.max_concurrent_subcalls
    ),
    "max_total_calls": Parameter(
        "a budget: the most model calls of one run's whole tree", _050, lambda s: s.budget.max_calls
    ),
    "max_total_tokens": Parameter(
        "a budget: the most tokens of one run's whole tree", _050, lambda s: s.budget.max_tokens
    ),
    "max_total_cost_usd": Parameter(
        "a budget: the most estimated cost of one run's whole tree", _050, lambda s: s.budget.max_cost_usd
    ),
    "max_elapsed_seconds": Parameter(
        "a budget: the longest wall time of one run", _050, lambda s: s.budget.max_elapsed_seconds
    ),
    "max_retries": Parameter("retries of a failed model call", _050, lambda s: s.retry.max_retries),
    "retry_backoff_seconds": Parameter(
        "the first delay between retries", _050, lambda s: s.retry.backoff_seconds
    ),
    "final_answer_validator": Parameter(
        "a check that may reject a final answer (recorded: whether one is set)",
        _050,
        lambda s: s.final_answer_validator is not None,
    ),
    "capture_trajectory_content": Parameter(
        "whether trajectory events keep prompts and answers", _050, lambda s: s.capture_trajectory_content
    ),
    "event_handler": Parameter("a callback for each trajectory event", _050),
    "completion_handler": Parameter("a replacement for litellm.acompletion", _050),
}
"""Every keyword ``RLM.__init__`` names (``**llm_kwargs`` aside); a test pins it to the signature."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """The ``max_total_*`` limits of one run's whole tree (None: unlimited), validated once."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_elapsed_seconds: float | None = None

    def __post_init__(self) -> None:
        self.start()  # RunBudget's checks, once, here

    def start(self) -> RunBudget:
        """A fresh :class:`RunBudget` for one run, its clock started now."""
        return RunBudget(**dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class Settings:
    """What an RLM node runs with; ``depth`` is the node's level (the constructor's ``_current_depth``)."""

    model: str
    recursive_model: str
    api_base: str | None
    api_key: str | None
    max_depth: int
    max_iterations: int
    recursive_max_iterations: int | None
    depth: int
    api: ApiSemantics
    llm_kwargs: Mapping[str, Any]
    repl: ReplConfig
    prompt_version: str | None
    budget: Budget
    retry: RetryPolicy
    max_concurrent_subcalls: int
    repl_max_snapshot_bytes: int
    repl_resource_limits: WorkerResourceLimits
    capture_trajectory_content: bool
    final_answer_validator: Callable[[str], str | None] | None
    observers: tuple[Observer, ...]
    trajectory_path: str | os.PathLike[str] | None

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
        return self.prompt_version or self.release.prompt_version

    def child(self) -> Settings:
        """One level deeper on the recursive model; the root's answer validator stays with the root."""
        iterations = (
            self.max_iterations if self.recursive_max_iterations is None else self.recursive_max_iterations
        )
        return dataclasses.replace(
            self,
            model=self.recursive_model,
            depth=self.depth + 1,
            max_iterations=iterations,
            final_answer_validator=None,
        )


# Over 80 lines for a reason: one keyword per RLM parameter (the constructor passes them all by
# name), each checked once, in the order the constructor always checked them.
def build_settings(
    *,
    api: ApiSemantics,
    llm_kwargs: Mapping[str, Any],
    model: str,
    recursive_model: str | None,
    api_base: str | None,
    api_key: str | None,
    max_depth: int | None,
    max_iterations: int,
    _current_depth: int,
    profile: str | Profile | None,
    prompt_version: str | None,
    repl_timeout: float | None,
    max_output_chars: int,
    isolation: str | None,
    limits: Limits | None,
    repl_config: ReplConfig | None,
    on_event: Observer | None,
    event_handler: Observer | None,
    observers: Iterable[Observer],
    trajectory_path: str | os.PathLike[str] | None,
    capture_trajectory_content: bool | None,
    max_total_calls: int | None,
    max_total_tokens: int | None,
    max_total_cost_usd: float | None,
    max_elapsed_seconds: float | None,
    max_concurrent_subcalls: int | None,
    max_retries: int | None,
    final_answer_validator: Callable[[str], str | None] | None,
    retry_backoff_seconds: float | None,
    repl_max_snapshot_bytes: int | None,
    repl_memory_limit_mb: int | None,
    repl_cpu_time_limit_seconds: int | None,
    repl_max_open_files: int | None,
    recursive_max_iterations: int | None,
) -> Settings:
    """Check every argument once (ConfigurationError naming the keyword) and fill the preset's defaults."""
    if not isinstance(model, str) or not model:
        raise ConfigurationError("model must be a non-empty string such as 'gpt-4o-mini'")
    release = select_release(api)
    max_depth = release.max_depth_default if max_depth is None else max_depth
    least = release.least_limit
    if max_concurrent_subcalls is None:
        max_concurrent_subcalls = release.max_concurrent_subcalls_default
    _check_ints(
        ("max_depth", max_depth, 0),
        ("max_iterations", max_iterations, least),
        ("max_output_chars", max_output_chars, least),
        ("_current_depth", _current_depth, 0),
    )
    if recursive_max_iterations is not None:
        _check_ints(("recursive_max_iterations", recursive_max_iterations, least))
    resources = _resource_limits(repl_memory_limit_mb, repl_cpu_time_limit_seconds, repl_max_open_files)
    snapshot = check_snapshot_bytes(
        "repl_max_snapshot_bytes",
        DEFAULT_SNAPSHOT_BYTES if repl_max_snapshot_bytes is None else repl_max_snapshot_bytes,
    )
    repl = _repl_config(repl_config, resources, profile, repl_timeout, max_output_chars, isolation, limits)
    build_system_prompt(0, version=prompt_version)  # fail now on an unknown version
    budget = Budget(max_total_calls, max_total_tokens, max_total_cost_usd, max_elapsed_seconds)
    _check_ints(
        ("max_concurrent_subcalls", max_concurrent_subcalls, 1),
        ("max_retries", 0 if max_retries is None else max_retries, 0),  # RetryPolicy re-checks
    )
    handlers = tuple(h for h in (on_event, event_handler, *observers) if h is not None)
    for handler in handlers:
        if not callable(handler):
            raise ConfigurationError(f"event observers must be callables, not {handler!r}")
    if final_answer_validator is not None and not callable(final_answer_validator):
        raise ConfigurationError(
            "final_answer_validator must be a callable (answer) -> None | reason, "
            f"not {final_answer_validator!r}"
        )
    retry = release.retry_policy(max_retries, retry_backoff_seconds)
    if capture_trajectory_content is None:
        capture_trajectory_content = release.capture_trajectory_content_default
    return Settings(
        model=model,
        recursive_model=recursive_model or model,
        api_base=api_base,
        api_key=api_key,
        max_depth=max_depth,
        max_iterations=max_iterations,
        recursive_max_iterations=recursive_max_iterations,
        depth=_current_depth,
        api=api,
        llm_kwargs=dict(llm_kwargs),
        repl=repl,
        prompt_version=prompt_version,
        budget=budget,
        retry=retry,
        max_concurrent_subcalls=max_concurrent_subcalls,
        repl_max_snapshot_bytes=snapshot,
        repl_resource_limits=resources,
        capture_trajectory_content=bool(capture_trajectory_content),
        final_answer_validator=final_answer_validator,
        observers=handlers,
        trajectory_path=trajectory_path,
    )


def _check_ints(*checks: tuple[str, Any, int]) -> None:
    for name, value, floor in checks:
        if isinstance(value, bool) or not isinstance(value, int) or value < floor:
            raise ConfigurationError(f"{name} must be an integer >= {floor}, not {value!r}")


def _repl_config(
    given: ReplConfig | None,
    resources: WorkerResourceLimits,
    profile: str | Profile | None,
    timeout: float | None,
    max_output_chars: int,
    isolation: str | None,
    limits: Limits | None,
) -> ReplConfig:
    """``repl_config`` whole, or one made of the loose REPL keywords (0.5.0's limits folded in)."""
    if resources.configured:
        if given is not None:
            raise ConfigurationError(
                "repl_memory_limit_mb / repl_cpu_time_limit_seconds / repl_max_open_files cannot "
                "be combined with repl_config=: set them in its limits (Limits(memory_mb=..., "
                "cpu_seconds=..., open_files=...))"
            )
        limits = resources.to_limits(limits)
    if given is None:
        return ReplConfig(
            profile=resolve_profile(profile),
            timeout=timeout,  # type: ignore[arg-type]  # None -> inf, validated
            max_output_chars=max_output_chars,
            isolation=isolation,
            limits=Limits() if limits is None else limits,
        )
    if not isinstance(given, ReplConfig):
        raise ConfigurationError(f"repl_config must be a ReplConfig, not {type(given).__name__}")
    return given


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
