"""Replay: re-execute a recorded run's code under any profile (:mod:`.replayer`), read other
implementations' trajectory logs (:mod:`.foreign`, the readers in :mod:`.formats`), and
``rlm-compat replay`` (:mod:`rlm_compat.tools.replay_cli`).

The recorded runs themselves (:mod:`rlm_compat.tools.runs.steps`) are shared with the view; replay
only reads them.
"""

from __future__ import annotations

__all__: list[str] = []
