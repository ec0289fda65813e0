"""``rlm-compat quirks``: recorded model code replayed under each single-quirk ablation, with
per-quirk step costs (the replay engine is :mod:`rlm_compat.tools.replay`)."""

from __future__ import annotations

__all__: list[str] = []
