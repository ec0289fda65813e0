"""The trajectory formats replay reads: rlm_compat's own, ``rlms``' and dspy.RLM's logs, and the
logs of applications built around those loops (:mod:`.app_logs`).

A room of its own below both ``replay`` and ``view``: the view renders what these readers read,
and ``rlm-compat replay`` writes a view, so the readers sit under both and neither imports the other's
package back. ``rlm_compat.tools.replay.foreign`` re-exports the public names (the documented path).
"""

from __future__ import annotations

__all__: list[str] = []
