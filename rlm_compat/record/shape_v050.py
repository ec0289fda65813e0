"""recursive-llm 0.5.0's trajectory shape, re-exported where it was first published.

The shaper is 0.5.0's release behaviour and lives in
:mod:`rlm_compat._releases.r050_trajectory_shape`.
"""

from __future__ import annotations

from .._releases.r050_trajectory_shape import ReleaseEvent, ReleaseShaper

__all__ = ["ReleaseEvent", "ReleaseShaper"]
