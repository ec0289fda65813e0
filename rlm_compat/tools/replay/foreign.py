"""The documented home of the foreign-trajectory importer: :func:`load_run`, :func:`detect_format`.

The readers live in :mod:`rlm_compat.tools.formats.foreign_runs` (below both replay and the
view, which render what they read); this module keeps ``rlm_compat.tools.replay.foreign.load_run``
importable.
"""

from __future__ import annotations

from ..formats.foreign_runs import FORMATS, detect_format, from_dspy, from_rlms, load_run

__all__ = ["FORMATS", "detect_format", "from_dspy", "from_rlms", "load_run"]
