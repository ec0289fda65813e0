"""What the record says about a run's settings and messages, without secrets or bulk.

``run_config`` is the ``config`` of the run-start event and the result objects: the RLM's public
settings, never ``api_key`` nor any model argument whose name suggests a credential, and the
OS-level hardening layers its REPL workers run under (``hardening``; empty inline).
``messages_digest`` names a message list by content, so a trajectory can carry the digest of what
was sent instead of repeating every earlier message at every call.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

from ..clients import jsonable as _jsonable
from ..types import Message

__all__ = ["messages_digest", "run_config"]

_SECRET_WORDS = ("key", "token", "secret", "password", "authorization", "header", "credential")


def run_config(rlm: Any) -> dict[str, Any]:
    """The settings of ``rlm`` (an RLM) as JSON-ready data, credentials left out."""
    timeout = rlm.repl_config.timeout
    return {
        "model": rlm.model,
        "recursive_model": rlm.recursive_model,
        "api_base": rlm.api_base,
        "max_depth": rlm.max_depth,
        "max_iterations": rlm.max_iterations,
        "depth": rlm._current_depth,
        "profile": rlm.profile.name,
        "api": rlm.api.name,
        "prompt_version": rlm.prompt_version or rlm.api.prompt_version,
        "isolation": str(rlm.repl_config.isolation),
        "hardening": _hardening(str(rlm.repl_config.isolation)),
        "repl_timeout": None if math.isinf(timeout) else timeout,
        "max_output_chars": rlm.repl_config.max_output_chars,
        "max_total_calls": rlm.max_total_calls,
        "max_total_tokens": rlm.max_total_tokens,
        "max_total_cost_usd": rlm.max_total_cost_usd,
        "max_elapsed_seconds": rlm.max_elapsed_seconds,
        "max_concurrent_subcalls": rlm.max_concurrent_subcalls,
        "max_retries": rlm.max_retries,
        "retry_backoff_seconds": rlm.retry_backoff_seconds,
        "repl_max_snapshot_bytes": rlm.repl_max_snapshot_bytes,
        "capture_trajectory_content": rlm.capture_trajectory_content,
        "final_answer_validator": rlm.final_answer_validator is not None,
        "client": type(rlm.client).__name__,
        "llm_kwargs": {
            k: v
            for k, v in sorted(rlm.llm_kwargs.items())
            if not any(word in k.lower() for word in _SECRET_WORDS) and _jsonable(v)
        },
    }


def _hardening(isolation: str) -> list[str]:
    """The OS-level layers of the run's workers (none inline: model code runs in this process)."""
    if isolation != "process":
        return []
    from ..sandbox.hardening import available_layers

    return list(available_layers())


def messages_digest(messages: Sequence[Message]) -> str:
    """``sha256:`` and the first 16 hex digits of the canonical JSON of ``messages``."""
    blob = json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]
