"""The REPL-namespace contract, public: what model code finds in its REPL, for the loop and for replay.

The loop engine builds a node's namespace with :func:`build_namespace` from a
:class:`SubCallProvider` (its own calls the model; replay's answers from a recorded run), so a new
REPL function is written once and both see it. The argument checks (:func:`check_text`,
:func:`texts`, :func:`query_pairs`) and the depth-limit text are the loop's, so replayed code is
refused where the loop refused it; :func:`observe_step` is how a step's outcome becomes the model's
next message and a typed :class:`~rlm_compat.errors.StepFailure` (:func:`observe`: a flag). The
implementation lives in :mod:`rlm_compat._loop`; tools import it from here.
"""

from __future__ import annotations

from ._loop import (
    DEPTH_TEXT,
    Namespace,
    SubCallProvider,
    build_namespace,
    check_text,
    observe,
    observe_step,
    query_pairs,
    texts,
)

__all__ = [
    "DEPTH_TEXT",
    "Namespace",
    "SubCallProvider",
    "build_namespace",
    "check_text",
    "observe",
    "observe_step",
    "query_pairs",
    "texts",
]
