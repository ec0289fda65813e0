"""One interface for every place model code can run, and the choice between them.

A runner executes the steps of REPL sessions: :class:`~.step.inline.InlineRunner` in the calling
thread, :class:`~.isolate.process.ProcessRunner` in a killable worker process per session. Both take the
whole :class:`~rlm_compat.config.ReplConfig`, answer with the same texts
(:mod:`.step.texts`) and raise the same REPLError subclasses; callers never ask which one they have.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .step.repl_config import ReplConfig

__all__ = ["Runner", "make_runner"]


class Runner(Protocol):
    """What :class:`~rlm_compat.repl.REPLExecutor` and the RLM loop need from a runner."""

    config: ReplConfig

    def execute(self, code: str, env: dict[str, Any], *, timeout: float | None = None) -> str:
        """Run one step of model code with ``env`` as the session's namespace; the observation.

        ``timeout``: this step's limit when shorter than ``config.timeout`` (validated by the caller).
        """

    def render(self, env: dict[str, Any], name: str) -> str:
        """``str(env[name])`` as a final answer, under the same limits as a step."""

    def close(self) -> None:
        """Release what the session holds (its worker); the runner stays usable."""

    def abort(self) -> None:
        """Stop a running step from another thread without waiting for it (kill its worker)."""


def make_runner(config: ReplConfig, *, state: str = "env", shared: Iterable[str] = ()) -> Runner:
    """The runner ``config.isolation`` asks for; ``state`` and ``shared``: where a worker's
    session keeps its variables (see :data:`.process.STATES`; inline, they are in ``env``)."""
    if config.in_process:
        from .isolate.process import ProcessRunner

        return ProcessRunner(config, state=state, shared=shared)
    from .step.inline import InlineRunner

    return InlineRunner(config)
