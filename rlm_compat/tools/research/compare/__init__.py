"""``rlm-compat compare``: the grid of implementations × models × tasks, its executors (threads, ray),
the peers behind the protocol (:mod:`.impls`), the scripted-policy endpoint, the tables and plots."""

from __future__ import annotations

__all__: list[str] = []
