"""Output capture: a capped per-execution text sink and the two ways ``print`` reaches it.

Nothing here swaps ``sys.stdout``: sandboxed ``print`` is rewritten at compile time to call one of
these objects, which find the current execution's sink through a thread-local, so prints inside
functions (even functions defined in earlier steps) land in the step that runs them. The
``session_*`` variants are what executors install: they write only into a step of their own
session, so a finalizer or a function of one executor running during another's step prints
nowhere.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from .attributes import checked_getattr
from .context import LOCAL, Session, own_state

__all__ = [
    "CappedText",
    "PrintCollector",
    "print_collector_factory",
    "sandbox_print",
    "session_collector_factory",
    "session_print",
    "session_show",
    "show",
]

_print = builtins.print


class CappedText:
    """Text written during one execution: the first ``limit`` characters kept, all counted.

    That is all the truncation marker needs (the head and the total length), so a print flood
    costs a counter increment, not memory. ``strip``: the text as if stripped of surrounding
    whitespace (leading whitespace is never kept; :attr:`shown_total` leaves the trailing out).
    """

    __slots__ = ("_kept", "_limit", "_parts", "_strip", "_trailing", "total")

    def __init__(self, limit: int, *, strip: bool = False) -> None:
        self._parts: list[str] = []
        self._kept = 0
        self._limit = limit
        self._strip = strip
        self._trailing = 0
        self.total = 0

    @property
    def shown_total(self) -> int:
        """The length the truncation marker reports (without trailing whitespace when stripping)."""
        return self.total - self._trailing

    def write(self, text: str) -> int:
        """Append ``text`` (str only, as a text file would insist)."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        written = len(text)
        if self._strip:
            if self.total == 0:
                text = text.lstrip()
            body = text.rstrip()
            self._trailing = self._trailing + len(text) if not body else len(text) - len(body)
        n = len(text)
        self.total += n
        room = self._limit - self._kept
        if room > 0:
            piece = text if n <= room else text[:room]
            self._parts.append(piece)
            self._kept += len(piece)
        return written

    def flush(self) -> None:
        """Nothing to flush; present because ``print(..., flush=True)`` calls it."""

    def getvalue(self) -> str:
        """The kept head (the whole text when ``total <= limit``)."""
        return "".join(self._parts)

    def extend(self, other: CappedText) -> None:
        """Append another capped text; the head stays exact because each part kept its own head."""
        hidden = other.total - len(other.getvalue())
        self.total += hidden
        self.write(other.getvalue())
        if hidden and self._strip:
            self._trailing = other._trailing if other._strip else 0


class _Discard:
    """Where prints go when sandboxed code runs outside any execution (host calling it later)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


_DISCARD = _Discard()


class _WriteAdapter:
    __slots__ = ("write",)

    def __init__(self, write: Any) -> None:
        self.write = write

    def flush(self) -> None:
        pass


def _target(file: Any) -> Any:
    if file is None:
        state = LOCAL.state
        return state.sink if state is not None else _DISCARD
    return _file_target(file)


def _file_target(file: Any) -> Any:
    return _WriteAdapter(checked_getattr(file, "write"))


def _own_sink(session: Session) -> Any:
    state = own_state(session)
    return state.sink if state is not None else _DISCARD


def sandbox_print(
    *objects: Any,
    sep: str | None = None,
    end: str | None = None,
    file: Any = None,
    flush: bool = False,
) -> None:
    """``print`` for sandboxed code: the current execution's sink, or ``file.write`` if given."""
    _print(*objects, sep=sep, end=end, file=_target(file))


def show(value: Any) -> None:
    """Display of the program's last expression: ``str(value)`` and a newline, nothing for None."""
    if value is not None:
        state = LOCAL.state
        sink = state.sink if state is not None else _DISCARD
        sink.write(str(value))
        sink.write("\n")


def session_print(session: Session) -> Callable[..., None]:
    """``print`` for ``session``'s code: into its own step's sink, else nowhere."""

    def print_(
        *objects: Any,
        sep: str | None = None,
        end: str | None = None,
        file: Any = None,
        flush: bool = False,
    ) -> None:
        _print(*objects, sep=sep, end=end, file=_own_sink(session) if file is None else _file_target(file))

    print_.__name__ = print_.__qualname__ = "print"
    return print_


def session_show(session: Session) -> Callable[[Any], None]:
    """:func:`show` for ``session``'s programs."""

    def show_(value: Any) -> None:
        if value is not None:
            sink = _own_sink(session)
            sink.write(str(value))
            sink.write("\n")

    return show_


class PrintCollector:
    """RestrictedPython's print collector, as 2fb46cc installs it (``_print`` in the namespace).

    Kept only for the ``stale_print_collector`` / ``print_in_functions_lost`` quirks; its text is
    capped like the sink so a flood cannot grow the namespace without bound.
    """

    def __init__(self, _getattr_: Any = None, *, limit: int | None = None) -> None:
        if limit is None:
            state = LOCAL.state
            limit = state.limit if state is not None else 0
        self.txt = CappedText(limit)

    def write(self, text: str) -> None:
        self.txt.write(text)

    def __call__(self) -> str:
        return self.txt.getvalue()

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        file = kwargs.pop("file", None)
        target = self if file is None else _target(file)
        _print(*objects, file=target, **kwargs)

    def __repr__(self) -> str:
        return f"<PrintCollector: {self.txt.total} chars>"


def print_collector_factory(_getattr_: Any = None) -> PrintCollector:
    """``_print_``: what RestrictedPython's rewritten code calls to make a collector."""
    return PrintCollector(_getattr_)


def session_collector_factory(session: Session) -> Callable[..., PrintCollector]:
    """``_print_`` for ``session``'s code: a collector that keeps nothing outside its steps."""

    def factory(_getattr_: Any = None) -> PrintCollector:
        state = own_state(session)
        return PrintCollector(_getattr_, limit=state.limit if state is not None else 0)

    return factory
