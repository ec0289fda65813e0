"""The data of a release's contract: :class:`ApiSemantics`, one field per place 2fb46cc and 0.5.0 differ.

The field defaults are 2fb46cc's contract (the default preset); each release module registers its
preset here under the names ``api=`` accepts (:func:`register`), so a preset's values live in its
release's module (:mod:`.r2fb46cc`, :mod:`.r050`) and this module never imports one.
Users import the class from :mod:`rlm_compat.compat`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import ConfigurationError

__all__ = ["ApiSemantics", "register"]

_PRESETS: dict[str, ApiSemantics] = {}


@dataclasses.dataclass(frozen=True)
class ApiSemantics:
    """One release's contract, field by field; ``v2fb46cc()`` and ``v050()`` are the presets."""

    name: str = "2fb46cc"
    """The preset's name, as ``api=`` takes it and the run record's ``config`` shows it."""
    release: str = "2fb46cc"
    """The release whose contract this is: the tag of the ``RLM`` keywords it brought in
    :data:`rlm_compat.settings.PARAMETERS` (``"0.5.0"``; 2fb46cc's are untagged)."""

    max_depth_default: int = 5
    """``RLM(max_depth=...)``'s default: 5 in 2fb46cc, 1 in 0.5.0."""
    depth_is_subcall_capability: bool = False
    """0.5.0: ``max_depth`` is what a run may call — 0 none (no query functions in the REPL),
    1 a plain model call, 2 one child RLM whose own sub-calls are plain calls. 2fb46cc: the number
    of RLM levels; a call at the last level answers ``"Max recursion depth (N) reached"``."""
    llm_query_takes_context: bool = False
    """0.5.0: ``llm_query(query, context="", model=None)``; 2fb46cc: ``llm_query(prompt, model=None)``."""
    standalone_final_only: bool = False
    """0.5.0: a response ends the run only when it is exactly one ``FINAL("literal")`` or
    ``FINAL_VAR(name)`` directive (or the REPL's ``answer`` dict is marked ready); 2fb46cc: a FINAL
    anywhere in the response."""
    stats_per_run: bool = False
    """0.5.0: ``rlm.stats`` describe the latest run's whole tree; 2fb46cc: ``llm_calls`` add up
    across runs of one RLM."""
    answer_object: bool = False
    """0.5.0: the REPL holds ``answer = {"content": "", "ready": False}``; setting ``ready`` ends
    the run with ``content``."""
    show_vars: bool = False
    strip_output_before_limit: bool = False
    """0.5.0: a step's output is stripped of surrounding whitespace before ``max_output_chars``
    cuts it, so the truncation marker counts the stripped text; 2fb46cc counts the raw output
    (print's trailing newline included). Sets :attr:`~rlm_compat.config.ReplConfig.strip_output`."""
    session_outlives_env: bool = False
    """0.5.0: a :class:`~rlm_compat.repl.REPLExecutor` keeps its variables from step to step
    whatever ``env`` dict each ``execute`` is given (that dict's names are added to the session,
    and the session's variables are written back to it); 2fb46cc: ``env`` is the session, so a
    new dict starts a new one."""
    """0.5.0: the REPL has ``SHOW_VARS()``, the user variables and their type names."""
    strict_limits: bool = False
    """0.5.0 refuses ``max_iterations=0`` and ``max_output_chars=0``; 2fb46cc takes them (a run
    that stops at once, steps that show no output)."""
    empty_response_feedback: str | None = None
    """0.5.0: an empty (or whitespace) model response is not run; this text is the next user
    message instead. 2fb46cc runs it (``"No code to execute"``)."""
    max_iterations_message: str = "Max iterations ({limit}) exceeded without FINAL()"
    """MaxIterationsError's text (0.5.0: "... without a final answer")."""
    max_retries_default: int = 2
    """``RLM(max_retries=...)``'s default. The RLM retries transient provider failures itself in
    every release (each attempt a counted, budgeted, recorded call; the SDK's and litellm's own
    retries are off). 2fb46cc left retries to the openai SDK under litellm, whose default is 2;
    0.5.0 retries only when asked (0)."""
    retry_switch_to_replacements: bool = False
    """0.5.0 sends litellm's ``num_retries=0`` on every call, also to a function patched over
    ``litellm.acompletion`` (its tests check it); 2fb46cc sent no retry keyword, so a patched
    function sees exactly its keywords. litellm itself gets ``num_retries=0`` either way."""
    retry_backoff_default: float = 0.5
    """``RLM(retry_backoff_seconds=...)``'s default: the first delay, doubled per attempt (the
    openai SDK's 0.5 s that 2fb46cc got; 0.5.0's own 1 s)."""
    parsed_final_method: str = "parsed"
    """The ``final_answer`` event's ``method`` for an answer read from the response text
    (0.5.0 calls it ``"directive"``)."""
    null_content_is_empty: bool = False
    """0.5.0: a reply whose content is null (reasoning-only, tool-call-only) counts as an empty
    response (event ``provider_response_normalized``); otherwise it is a ProviderResponseError."""
    leaf_system_prompt: str | None = None
    """0.5.0: every plain sub-call (``llm_query``, ``llm_query_batched``, ``rlm_query`` at the depth
    limit) starts with a system message saying it answers a subproblem directly; 2fb46cc sends the
    prompt alone."""
    leaf_with_context: str = "{query}\n\n{context}"
    """A plain sub-call's user message for a query over a context (0.5.0:
    ``"Task:\\n{query}\\n\\nContext:\\n{context}"``); a query without context is sent alone."""
    trajectory_shape: str = "rlm_compat"
    """What ``result.trajectory`` and event handlers receive: ``"rlm_compat"``, the typed events
    of docs/trajectory.md; ``"0.5"``, 0.5.0's field names with texts redacted unless asked for
    (:mod:`rlm_compat.record.shape_v050`). A ``trajectory_path`` file is rlm_compat's either way."""
    capture_trajectory_content_default: bool = True
    """``RLM(capture_trajectory_content=...)``'s default: 0.5.0 keeps only text lengths unless asked."""
    prompt_version: str = "cc7a826"
    """The system prompt sent when ``RLM(prompt_version=...)`` is not given (0.5.0's own text,
    which states the standalone-FINAL protocol this preset enforces)."""
    max_concurrent_subcalls_default: int = 16
    """``RLM(max_concurrent_subcalls=...)``'s default: how many model calls of one batched
    sub-call run at once (0.5.0: 4; 2fb46cc has no batched calls, rlm_compat's own default 16)."""
    module_renames: tuple[tuple[str, str], ...] = ()
    """Aliased submodules whose module-level functions follow this release: ``rlm.<a>`` is
    ``rlm_compat.<b>`` under :func:`~rlm_compat.dropin.install_alias` (0.5.0: ``parser`` ->
    ``parser_v050``, its standalone-directive functions; ``repl`` -> ``repl_v050``, its
    executor constructor)."""

    @classmethod
    def v2fb46cc(cls) -> ApiSemantics:
        """ysz/recursive-llm 2fb46cc / cc7a826 (its 0.1.0): the default."""
        return cls.named("2fb46cc")

    @classmethod
    def v050(cls) -> ApiSemantics:
        """PyPI ``recursive-llm`` 0.5.0."""
        return cls.named("0.5")

    @classmethod
    def named(cls, name: str) -> ApiSemantics:
        """The preset called ``name``: ``"2fb46cc"`` (``"cc7a826"``, ``"0.1"``) or ``"0.5"`` (``"0.5.0"``)."""
        try:
            return _PRESETS[name]
        except KeyError:
            raise ConfigurationError(
                f"unknown api {name!r}; choose one of {sorted(_PRESETS)} or pass an ApiSemantics"
            ) from None

    def replace(self, **changes: Any) -> ApiSemantics:
        """A copy with some fields changed (unknown names refused)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ConfigurationError(f"unknown ApiSemantics field(s) {unknown}")
        return dataclasses.replace(self, **changes)


def register(preset: ApiSemantics, *names: str) -> ApiSemantics:
    """Make ``preset`` what ``api=`` means by each of ``names`` (called by the release modules)."""
    for name in names:
        _PRESETS[name] = preset
    return preset
