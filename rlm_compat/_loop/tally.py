"""2fb46cc's ``stats`` figures of one RLM: its model calls across runs and its last run's iterations."""

from __future__ import annotations

import threading

__all__ = ["Tally"]


class Tally:
    """Counted under a lock: a node's leaf sub-calls arrive from several tasks at once.

    Each RLM node has its own (a child's calls are not its parent's, as in 2fb46cc, whose child
    RLMs are separate objects).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.llm_calls = 0
        self.iterations = 0

    def count_call(self) -> None:
        with self._lock:
            self.llm_calls += 1
