"""Live progress of a run on a terminal: a status line kept current, the step lines above it.

:class:`RunProgress` folds the event stream into the figures a person watching wants — the root's
iteration, the deepest RLM running, model calls in flight, calls done, tokens, cost, elapsed time.
:class:`LiveProgress` shows them with rich as a status line redrawn in place (rich is imported only
here, and only when a live display starts, so ``import rlm_compat`` stays fast), printing the
:class:`~rlm_compat.record.progress.ProgressPrinter` lines above it as steps finish. Where the
stream is not a terminal, callers use the ProgressPrinter itself: plain lines, no cursor movement.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, TextIO

from ...events import (
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    RlmFailed,
    RlmFinished,
    RlmStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    TrajectoryEvent,
)
from ...record.progress import format_event

__all__ = ["LiveProgress", "RunProgress"]


class RunProgress:
    """Observer keeping a run's live figures (read from any thread through :meth:`status`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.ended: float | None = None
        self.outcome = ""
        self.running = False
        self.iteration = 0
        self.max_iterations: int | None = None
        self.in_flight = 0
        self.calls = 0
        self.tokens = 0
        self.cost: float | None = None
        self.max_depth_seen = 0
        self._active: dict[str, int] = {}

    def __call__(self, event: TrajectoryEvent) -> None:
        with self._lock:
            self._fold(event)

    def _fold(self, event: TrajectoryEvent) -> None:
        if isinstance(event, RunStarted):  # the clock of the step lines (event.elapsed_seconds)
            self.started = time.monotonic() - event.elapsed_seconds
            self.running = True
            limit = event.config.get("max_iterations")
            self.max_iterations = limit if isinstance(limit, int) else None
        elif isinstance(event, RlmStarted):
            self._active[event.node_id] = event.depth
            self.max_depth_seen = max(self.max_depth_seen, event.depth)
        elif isinstance(event, (RlmFinished, RlmFailed)):
            self._active.pop(event.node_id, None)
        elif isinstance(event, ModelCallStarted):
            self.in_flight += 1
            if not event.is_leaf and event.depth == 0 and event.iteration is not None:
                self.iteration = event.iteration
        elif isinstance(event, (ModelCallFinished, ModelCallFailed)):
            self.in_flight = max(0, self.in_flight - 1)
            if isinstance(event, ModelCallFinished):
                self.calls += 1
                self.tokens += event.total_tokens or 0
                if event.cost_usd is not None:
                    self.cost = (self.cost or 0.0) + event.cost_usd
        elif isinstance(event, (RunFinished, RunFailed)):
            self.ended = time.monotonic()
            self.outcome = "done" if isinstance(event, RunFinished) else f"failed ({event.error_type})"

    def status(self) -> str:
        """One line: ``iteration 3/30 · depth 1 · 2 in flight · 5 calls · 1,234 tokens · $0.0012 · 4.2s``.

        ``depth`` is the deepest RLM running; once none is (the run ended), the deepest reached.
        """
        with self._lock:
            limit = f"/{self.max_iterations}" if self.max_iterations is not None else ""
            depth = max(self._active.values(), default=self.max_depth_seen)
            cost = "$-" if self.cost is None else f"${self.cost:.4f}"
            elapsed = (self.ended if self.ended is not None else time.monotonic()) - self.started
            parts = [
                f"iteration {self.iteration}{limit}",
                f"depth {depth}",
                f"{self.in_flight} in flight",
                f"{self.calls} calls",
                f"{self.tokens:,} tokens",
                cost,
                f"{elapsed:.1f}s",
            ]
            if self.outcome:
                parts.insert(0, self.outcome)
            elif not self.running:
                return "starting (loading the model client)"
            return " · ".join(parts)


class LiveProgress:
    """A rich status line on ``stream`` (a terminal), redrawn a few times a second; an observer.

    Use as a context manager around the run: entering starts the display, leaving stops it and
    leaves the final status line on screen. Step lines go above the status line as they happen, and
    so does anything written to ``sys.stdout`` / ``sys.stderr`` meanwhile (rich redirects both while
    live): standard output stays the answer's alone.
    """

    def __init__(self, stream: TextIO, *, refresh_per_second: float = 8) -> None:
        self.progress = RunProgress()
        self._stream = stream
        self._refresh = refresh_per_second
        self._live: Any = None

    def __enter__(self) -> LiveProgress:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self._stream, force_terminal=True, highlight=False, soft_wrap=False)
        self._live = Live(
            get_renderable=self._render,
            console=console,
            refresh_per_second=self._refresh,
            redirect_stdout=True,
            redirect_stderr=True,
            transient=False,
        )
        self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __call__(self, event: TrajectoryEvent) -> None:
        self.progress(event)
        line = format_event(event)
        if line is not None and self._live is not None:
            from rich.text import Text

            text = Text(f"[{event.elapsed_seconds:7.2f}s] {'  ' * event.depth}{line}", no_wrap=True)
            self._live.console.print(text)

    def _render(self) -> Any:
        from rich.spinner import Spinner
        from rich.text import Text

        status = self.progress.status()
        if self.progress.ended is not None:
            style = "green" if self.progress.outcome == "done" else "red"
            return Text(status, style=style, no_wrap=True)
        return Spinner("dots", text=Text(status, no_wrap=True), style="cyan")
