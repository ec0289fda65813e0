"""PyPI ``recursive-llm`` 0.5.0: what this release decides, whatever the profile.

0.5.0 changed the contract, not only the defects, so these decide over the profile: a reply
ends a node only when it *is* one ``FINAL("literal")`` / ``FINAL_VAR(name)`` directive
(:mod:`rlm_compat.parser_v050`), settled before any code runs; the REPL holds the ``answer``
dict (``{"content": "", "ready": False}``; ``ready`` ends the run with ``content``);
``max_depth`` counts what a run may call, so ``max_depth=0`` offers no query functions and a
root run is never refused; ``llm_query`` takes a context second and ``recursive_llm`` is
``rlm_query``; the result's trajectory and the user's handlers get 0.5.0's event shape
(:class:`~rlm_compat.record.shape_v050.ReleaseShaper`); and the ``RLM`` keywords it brought are
its option table (tagged :data:`NAME` in :data:`rlm_compat.settings.PARAMETERS`). The texts and
defaults (retry policy, prompt version, messages) are its data, :data:`PRESET`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import parser_v050
from ..compat import ApiSemantics
from ..parser import FinalResolution
from ..record.shape_v050 import ReleaseShaper

__all__ = ["NAME", "PRESET", "answer_dict", "answer_ready", "final_rule", "shaper"]

NAME = "0.5.0"
PRESET = ApiSemantics.v050()
"""The release's data: every field where 2fb46cc and 0.5.0 differ."""


def final_rule() -> tuple[str, Callable[..., FinalResolution], bool]:
    """``(name, rule, first)``: the standalone directive, settled before the code (it is never run)."""
    return NAME, parser_v050.resolve_final, True


def answer_dict() -> dict[str, Any]:
    """The REPL's ``answer`` as a run starts."""
    return {"content": "", "ready": False}


def answer_ready(published: Any) -> bool:
    """Whether the REPL's ``answer`` says the run is over."""
    return isinstance(published, dict) and bool(published.get("ready"))


def shaper(*, capture: bool, max_retries: int) -> ReleaseShaper:
    """The converter of a run's events into 0.5.0's trajectory shape."""
    return ReleaseShaper(capture=capture, max_attempts=1 + max_retries)
