"""PyPI ``recursive-llm`` 0.5.0: what this release decides, whatever the profile.

0.5.0 changed the contract, not only the defects, so these decide over the profile: a reply
ends a node only when it *is* one ``FINAL("literal")`` / ``FINAL_VAR(name)`` directive
(:mod:`.r050_directive`), settled before any code runs; the REPL holds the ``answer``
dict (``{"content": "", "ready": False}``; ``ready`` ends the run with ``content``);
``max_depth`` counts what a run may call, so ``max_depth=0`` offers no query functions and a
root run is never refused; ``llm_query`` takes a context second and ``recursive_llm`` is
``rlm_query``; the result's trajectory and the user's handlers get 0.5.0's event shape
(:class:`.r050_trajectory_shape.ReleaseShaper`); and the ``RLM`` keywords it brought are
its option table (tagged :data:`NAME` in :data:`rlm_compat.settings.PARAMETERS`). The texts and
defaults (retry policy, prompt version, messages) are its data, :data:`PRESET`.

Its code: :mod:`.r050_directive` (the standalone-directive parser, ``rlm.parser`` under the 0.5
preset), :mod:`.r050_trajectory_shape` (the event shape) and :data:`DEFAULT_SNAPSHOT_BYTES` /
:func:`check_snapshot_bytes` (the cap of 0.5.0's ``env`` snapshot, an option too).
:mod:`rlm_compat.parser_v050` and :mod:`rlm_compat.record.shape_v050` re-export them under the
names users and 0.5.0's tests import; the executor behind 0.5.0's ``REPLExecutor`` constructor
(``rlm.repl``) is :mod:`rlm_compat.repl_v050`, above :mod:`rlm_compat.repl` (a release's package
never imports the executor, so declaring options loads no REPL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeGuard

from ..errors import ConfigurationError
from ..parser import FinalResolution
from . import r050_directive as directive
from .contract import ApiSemantics, register
from .r050_trajectory_shape import ReleaseShaper

__all__ = [
    "DEFAULT_SNAPSHOT_BYTES",
    "NAME",
    "PRESET",
    "answer_dict",
    "answer_ready",
    "check_snapshot_bytes",
    "final_rule",
    "shaper",
]

NAME = "0.5.0"
PRESET = register(
    ApiSemantics(
        name="0.5",
        release=NAME,
        max_depth_default=1,
        depth_is_subcall_capability=True,
        llm_query_takes_context=True,
        standalone_final_only=True,
        stats_per_run=True,
        answer_object=True,
        show_vars=True,
        session_outlives_env=True,
        strip_output_before_limit=True,
        strict_limits=True,
        empty_response_feedback=(
            "Your response was empty. Reply with one Python step to run in the REPL, or with a "
            'final directive (FINAL("...") or FINAL_VAR(name)) as the whole response.'
        ),
        null_content_is_empty=True,
        parsed_final_method="directive",
        max_retries_default=0,
        retry_switch_to_replacements=True,
        retry_backoff_default=1.0,
        max_iterations_message="Max iterations ({limit}) exceeded without a final answer",
        leaf_system_prompt=(
            "Answer the subproblem from the context given with it, and only that context. "
            "Reply with the answer itself: no REPL code, no FINAL directive."
        ),
        leaf_with_context="Task:\n{query}\n\nContext:\n{context}",
        trajectory_shape="0.5",
        capture_trajectory_content_default=False,
        max_concurrent_subcalls_default=4,
        prompt_version="0.5.0",
        module_renames=(("parser", "parser_v050"), ("repl", "repl_v050")),
    ),
    "0.5",
    "0.5.0",
)
"""The release's data: every field where 2fb46cc and 0.5.0 differ (``api="0.5"``)."""


def final_rule() -> tuple[str, Callable[..., FinalResolution], bool]:
    """``(name, rule, first)``: the standalone directive, settled before the code (it is never run)."""
    return NAME, directive.resolve_final, True


def answer_dict() -> dict[str, Any]:
    """The REPL's ``answer`` as a run starts."""
    return {"content": "", "ready": False}


def answer_ready(published: Any) -> TypeGuard[dict[str, Any]]:
    """Whether the REPL's ``answer`` says the run is over."""
    return isinstance(published, dict) and bool(published.get("ready"))


def shaper(*, capture: bool, max_retries: int) -> ReleaseShaper:
    """The converter of a run's events into 0.5.0's trajectory shape."""
    return ReleaseShaper(capture=capture, max_attempts=1 + max_retries)


DEFAULT_SNAPSHOT_BYTES = 1_000_000
"""0.5.0's ``max_snapshot_bytes`` default: what of the session's plain data ``env`` gets back."""


def check_snapshot_bytes(keyword: str, value: Any) -> int:
    """0.5.0's snapshot cap, checked: a positive int (ConfigurationError naming ``keyword``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{keyword} must be an integer >= 1 (bytes), not {value!r}")
    return value
