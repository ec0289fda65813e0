"""Every error rlm_compat raises on purpose.

The hierarchy mirrors upstream's (``RLMError`` > ``MaxIterationsError`` / ``MaxDepthError``;
``REPLError`` standing apart, exactly as in ``rlm.repl``) so that ``except`` clauses written for
ysz/recursive-llm keep catching the same things. New failure modes get subclasses rather than new
roots, so a caller catching the upstream class still catches them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

__all__ = [
    "RAN_AND_FAILED",
    "BudgetExceededError",
    "ConfigurationError",
    "FinalVarMissingError",
    "LLMCallError",
    "MaxDepthError",
    "MaxIterationsError",
    "ProviderResponseError",
    "REPLError",
    "REPLSecurityError",
    "REPLTimeoutError",
    "REPLWorkerFaultError",
    "RLMError",
    "SessionBusyError",
    "StepFailure",
    "ToolError",
    "TrajectoryError",
    "UnknownOptionWarning",
    "UnsupportedOptionError",
]


class RLMError(Exception):
    """Base error for an RLM run (upstream: ``rlm.core.RLMError``)."""


class MaxIterationsError(RLMError):
    """The loop used ``max_iterations`` model calls without reaching a final answer."""


class MaxDepthError(RLMError):
    """An RLM was started at or beyond ``max_depth``."""


class ConfigurationError(RLMError, ValueError):
    """A constructor or option received a value it cannot use (bad profile name, negative limit...)."""


class UnknownOptionWarning(UserWarning):
    """A keyword argument that is neither the RLM's nor a known model-call option (a typo, or a
    provider-specific setting): forwarded to the model call as 2fb46cc did, but never silently."""


class UnsupportedOptionError(ConfigurationError):
    """A recognised option this build refuses: another release's, not implemented here, or ruled out
    by the selected API semantics. Refused rather than ignored, so no limit is silently lost."""


class LLMCallError(RLMError):
    """The language model could not be called, or answered with something that is not a reply."""


class TrajectoryError(RLMError, ValueError):
    """A trajectory file (ours, ``rlms``' or dspy.RLM's) is unreadable: truncated, corrupt or of an
    unknown format; or it cannot be replayed as asked. The message names the file and line.

    A ValueError too, as :func:`rlm_compat.record.read_trajectory` raised before it existed.
    """


class ProviderResponseError(LLMCallError):
    """The provider answered, but not with a usable reply: a malformed or empty body, no choices, no text.

    Retried by the RLM like other transient failures (``max_retries``), as recursive-llm 0.5.0
    does: a proxy or a provider under load may cut or garble one answer and send the next whole.
    """


class SessionBusyError(RLMError):
    """A persistent RLM (``persistent=True``) was called while it was answering another call: its
    session takes one call at a time."""


class ToolError(RLMError):
    """A custom tool's call broke the tool protocol: a result that is not plain data, arguments or
    a result over the tool's byte limit, or a call past its ``timeout``. Raised into the model's
    code (which may catch it); what the tool itself raises reaches the code as its own class."""


class BudgetExceededError(RLMError):
    """A run's budget (calls, tokens, cost or wall time) is spent; the whole run tree stops.

    ``metric`` names the limit (``llm_calls``, ``total_tokens``, ``estimated_cost_usd``,
    ``elapsed_seconds``), ``limit`` and ``observed`` the figures. ``stats`` holds the run's
    tree-wide statistics at the moment it stopped and ``trajectory_path`` the trajectory file, if
    one was written, so a stopped run can be inspected and its cost accounted for.
    """

    abort_repl = True
    """Raised inside a REPL step (by a sub-call), it ends the step and the run: model code cannot
    catch it and go on (recursive-llm 0.5.0's attribute of the same name)."""

    def __init__(self, metric: str, limit: float, observed: float, scope: str = "run") -> None:
        self.metric = metric
        self.limit = limit
        self.observed = observed
        self.scope = scope
        """``run`` (the call's ``max_total_*``) or ``session`` (a persistent RLM's ``session_budget``)."""
        self.stats: dict[str, Any] | None = None
        self.trajectory_path: str | None = None
        fix = (
            "raise the matching session_budget entry, or close() the session to start a new one"
            if scope == "session"
            else "raise the matching max_total_* / max_elapsed_seconds argument or shrink the task"
        )
        figures = f"limit={limit:g}, observed={observed:g}"
        super().__init__(f"{scope.capitalize()} budget exceeded for {metric}: {figures}; {fix}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.metric, self.limit, self.observed, self.scope), self.__dict__)


StepStage = Literal["syntax", "policy", "run"]


@dataclasses.dataclass(frozen=True)
class StepFailure:
    """How a REPL step failed, as data: what the loop decides by, whatever the error's wording.

    ``stage``: ``"syntax"`` — the code did not compile, so nothing ran; ``"policy"`` — it compiled
    and the sandbox refused it before it ran; ``"run"`` — it ran and failed (raised, timed out,
    outgrew its memory, lost its worker). ``directive``: what raised is the ``FINAL`` /
    ``FINAL_VAR`` directive itself (its name undefined, or ``FINAL_VAR`` naming no variable),
    after the code before it ran.
    """

    stage: StepStage = "run"
    directive: bool = False


RAN_AND_FAILED = StepFailure()
"""The plain failure: the code ran and raised (or timed out, or lost its worker)."""


class REPLError(Exception):
    """Code run in the REPL failed (upstream: ``rlm.repl.REPLError``; deliberately not an RLMError).

    ``failure`` says how, as data (:class:`StepFailure`); the message is only for people and models.
    """

    def __init__(self, *args: Any, failure: StepFailure = RAN_AND_FAILED) -> None:
        super().__init__(*args)
        self.failure = failure

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self.args, self.__dict__)


class REPLTimeoutError(REPLError):
    """Code run in the REPL exceeded the executor's ``timeout``; the executor and env stay usable."""


class REPLSecurityError(REPLError):
    """Code run in the REPL tried to reach something the sandbox policy forbids."""


class FinalVarMissingError(REPLError):
    """``FINAL_VAR(name)`` named a variable that does not exist in the REPL namespace."""


class REPLWorkerFaultError(REPLError):
    """The REPL worker process sent its parent something the channel's protocol does not allow
    (a malformed message, one out of turn, or one over a limit of what the parent reads: then
    ``limit`` names it); the worker was replaced and the step failed. A worker whose code
    escaped every layer above the OS is the only one that does this."""

    def __init__(self, message: str = "", limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.limit))
