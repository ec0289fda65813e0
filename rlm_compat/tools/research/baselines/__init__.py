"""``rlm-compat baseline``: the unofficial baseline page — the quick probes, their record and
provenance, the fixtures they read, and the page built from them."""

from __future__ import annotations

__all__: list[str] = []
