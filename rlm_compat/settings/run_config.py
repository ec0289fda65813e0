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
from collections.abc import Sequence
from typing import Any

from ..clients import jsonable as _jsonable
from ..types import Message
from .table import RECORDED, Settings

__all__ = ["messages_digest", "run_config"]

_SECRET_WORDS = ("key", "token", "secret", "password", "authorization", "header", "credential")


def run_config(settings: Settings, client: Any, context_chars: int = 0) -> dict[str, Any]:
    """The RLM's ``settings`` (and its ``client``'s type) as JSON-ready data, credentials left out.

    One key per constructor keyword that :data:`~rlm_compat.settings.RECORDED` names,
    plus what no single keyword holds: the node's depth, the API preset, the workers' hardening
    layers, whether the root's context is shared with concurrent runs over the same text (a
    context template), the client's type and the model-call options. Where the step timeout follows the
    context (profile ``fixed``, none given), ``repl_timeout`` is the root's, for its context of
    ``context_chars`` characters (what a replay of the run should allow), and
    ``repl_timeout_rule`` says how it was made; otherwise that rule is None.
    """
    config = {name: read(settings) for name, read in RECORDED.items()}
    repl = settings.repl
    rule = None
    if repl.timeout_per_gb:
        config["repl_timeout"] = repl.timeout_for(context_chars)
        rule = {"seconds": repl.timeout, "per_gb": repl.timeout_per_gb, "context_chars": context_chars}
    return {
        **config,
        "repl_timeout_rule": rule,
        "depth": settings.depth,
        "api": settings.api.name,
        "hardening": _hardening(str(settings.repl.isolation)),
        "context_sharing": _sharing(settings, context_chars),
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


def _sharing(settings: Settings, context_chars: int) -> dict[str, Any] | None:
    """Whether the root's worker takes its context from a context template, shared with every
    concurrent run over the same text (None: the run's code runs inline, or never shares)."""
    repl = settings.repl
    if str(repl.isolation) != "process":
        return None
    from ..sandbox import sharing_threshold

    least = sharing_threshold(repl.start_method)
    return None if least is None else {"min_chars": least, "shared": context_chars >= least}


def messages_digest(messages: Sequence[Message]) -> str:
    """``sha256:`` and the first 16 hex digits of the canonical JSON of ``messages``."""
    blob = json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]
