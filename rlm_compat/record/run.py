"""Per-run state: one :class:`Run` for each root ``complete()``, shared by its whole tree.

The loop holds no run figures of its own. It hands every event to ``Run.emit``, which numbers it,
keeps it for the result object and passes it to the observers in order (the tree stats, the
budget, a trajectory file, the user's handlers). Under the 0.5 API preset a
:class:`~rlm_compat._releases.r050_trajectory_shape.ReleaseShaper` converts what the result keeps and the
user's handlers see to recursive-llm 0.5.0's shape; the internal observers see the original.
Several runs of one RLM instance, from threads or tasks, each have their own Run, so their
figures never mix.
"""

from __future__ import annotations

import itertools
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .._releases.r050_trajectory_shape import ReleaseShaper
from ..events import TrajectoryEvent
from .budget import RunBudget
from .stats import TreeStats
from .trajectory import TrajectoryWriter

__all__ = ["Observer", "Run"]

Observer = Callable[[TrajectoryEvent], None]
"""Anything called with each event, in sequence order."""

_E = TypeVar("_E", bound=TrajectoryEvent)


class Run:
    """The record of one run: event numbering, the kept trajectory, stats, budget and observers.

    Observers are called under the run's lock, one event at a time, so they see events in
    ``sequence`` order and need no locking of their own. A user observer that raises is reported
    once as a RuntimeWarning and then skipped for that event: watching a run must not break it.
    """

    def __init__(
        self,
        *,
        budget: RunBudget | None = None,
        observers: Iterable[Observer] = (),
        trajectory: TrajectoryWriter | None = None,
        shape: ReleaseShaper | None = None,
    ) -> None:
        self.started = time.monotonic()
        self.stats = TreeStats()
        self.budget = budget if budget is not None else RunBudget()
        self.trajectory_writer = trajectory
        self._internal: list[Observer] = [self.stats, self.budget]
        if trajectory is not None:
            self._internal.append(trajectory)
        self._external = list(observers)
        self.shape = shape
        self._events: list[TrajectoryEvent] = []
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._sequence = itertools.count(1)
        self._warned: set[int] = set()

    @property
    def trajectory_path(self) -> str | None:
        """Where the trajectory file is written, if one is."""
        return None if self.trajectory_writer is None else str(self.trajectory_writer.path)

    def node_id(self, prefix: str) -> str:
        """A fresh node id, ``rlm-N`` or ``call-N``, unique within the run."""
        with self._lock:
            return f"{prefix}-{next(self._ids)}"

    def emit(self, cls: type[_E], **fields: Any) -> _E:
        """Build the next event of kind ``cls`` and deliver it to every observer."""
        with self._lock:
            event = cls(
                sequence=next(self._sequence),
                elapsed_seconds=round(time.monotonic() - self.started, 6),
                **fields,
            )
            for observer in self._internal:
                observer(event)
            shown: TrajectoryEvent | None = event if self.shape is None else self.shape(event)
            if shown is None:
                return event
            self._events.append(shown)
            for observer in self._external:
                try:
                    observer(shown)
                except Exception as exc:
                    if id(observer) not in self._warned:
                        self._warned.add(id(observer))
                        warnings.warn(
                            f"event observer {observer!r} raised {type(exc).__name__}: {exc}; "
                            "the run continues without its result for this event",
                            RuntimeWarning,
                            stacklevel=2,
                        )
        return event

    def note_context(self, node_id: str, context: Any) -> None:
        """Tell the shaper, if any, the context RLM node ``node_id`` was given."""
        if self.shape is not None:
            self.shape.note_context(node_id, context)

    def events(self) -> tuple[TrajectoryEvent, ...]:
        """The events so far, as the result shows them (shaped, if a shaper is set)."""
        with self._lock:
            return tuple(self._events)

    def snapshot(self) -> dict[str, Any]:
        """Tree-wide stats with the budget's figures under ``budget``."""
        stats = self.stats.snapshot()
        stats["budget"] = self.budget.snapshot()
        return stats

    def close(self) -> None:
        """Close the trajectory file, if any."""
        if self.trajectory_writer is not None:
            self.trajectory_writer.close()
