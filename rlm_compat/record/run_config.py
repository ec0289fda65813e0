"""What the record says about a run's settings and messages, without secrets or bulk.

``run_config`` is the ``config`` of the run-start event and the result objects: the RLM's
:class:`~rlm_compat.settings.Settings`, never ``api_key`` nor any model argument whose name
suggests a credential, and the OS-level hardening layers its REPL workers run under
(``hardening``; empty inline).
``messages_digest`` names a message list by content, so a trajectory can carry the digest of what
was sent instead of repeating every earlier message at every call.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..clients import jsonable as _jsonable
from ..types import Message

if TYPE_CHECKING:  # the settings module imports the record package; at run time no import is needed
    from ..settings import Settings

__all__ = ["messages_digest", "run_config"]

_SECRET_WORDS = ("key", "token", "secret", "password", "authorization", "header", "credential")


def run_config(settings: Settings, client: Any) -> dict[str, Any]:
    """The RLM's ``settings`` (and its ``client``'s type) as JSON-ready data, credentials left out."""
    timeout = settings.repl.timeout
    budget = settings.budget
    isolation = str(settings.repl.isolation)
    return {
        "model": settings.model,
        "recursive_model": settings.recursive_model,
        "api_base": settings.api_base,
        "max_depth": settings.max_depth,
        "max_iterations": settings.max_iterations,
        "depth": settings.depth,
        "profile": settings.profile.name,
        "api": settings.api.name,
        "prompt_version": settings.effective_prompt_version,
        "isolation": isolation,
        "hardening": _hardening(isolation),
        "repl_timeout": None if math.isinf(timeout) else timeout,
        "max_output_chars": settings.repl.max_output_chars,
        "max_total_calls": budget.max_calls,
        "max_total_tokens": budget.max_tokens,
        "max_total_cost_usd": budget.max_cost_usd,
        "max_elapsed_seconds": budget.max_elapsed_seconds,
        "max_concurrent_subcalls": settings.max_concurrent_subcalls,
        "max_retries": settings.retry.max_retries,
        "retry_backoff_seconds": settings.retry.backoff_seconds,
        "repl_max_snapshot_bytes": settings.repl_max_snapshot_bytes,
        "capture_trajectory_content": settings.capture_trajectory_content,
        "final_answer_validator": settings.final_answer_validator is not None,
        "client": type(client).__name__,
        "llm_kwargs": {
            k: v
            for k, v in sorted(settings.llm_kwargs.items())
            if not any(word in k.lower() for word in _SECRET_WORDS) and _jsonable(v)
        },
    }


def _hardening(isolation: str) -> list[str]:
    """The OS-level layers of the run's workers (none inline: model code runs in this process)."""
    if isolation != "process":
        return []
    from ..sandbox import available_layers

    return list(available_layers())


def messages_digest(messages: Sequence[Message]) -> str:
    """``sha256:`` and the first 16 hex digits of the canonical JSON of ``messages``."""
    blob = json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]
