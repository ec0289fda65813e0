"""A pytest plugin that keeps a failure's report small, whatever the exception looks like.

Sandboxed code can fail with chains of thousands of exceptions, each carrying a traceback of
thousands of frames (a recursion that catches ``BaseException`` and recurses again). pytest formats
every frame of every link with its source: one such failure once kept ``python -m pytest`` busy for
more than ten minutes after the test had finished, so the run looked hung. Before pytest builds the
report, this hook cuts an oversized exception down to the first and last frames of each traceback
and the outermost links of its chain, and says what it cut in a report section.

tests/conftest.py loads it for the suite (``pytest_plugins``); ``-p report_guard`` loads it anywhere (tests/ on sys.path).
"""

from __future__ import annotations

from collections.abc import Generator
from types import TracebackType

import pytest

#: Frames (all links of the chain together) above which the report is cut down.
MAX_FRAMES = 400
#: Frames kept at each end of a traceback that is cut.
KEEP_FRAMES = 15
#: Links of a ``__cause__`` / ``__context__`` chain kept, the raised exception first.
KEEP_LINKS = 3


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes / contexts, outermost first, cycles broken."""
    links: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        links.append(current)
        current = current.__cause__ if current.__cause__ is not None else current.__context__
    return links


def _frames(tb: TracebackType | None, limit: int) -> int:
    """Frames in ``tb``, counting stops once past ``limit`` (a chain can hold millions)."""
    count = 0
    while tb is not None and count <= limit:
        count += 1
        tb = tb.tb_next
    return count


def _oversized(exc: BaseException) -> bool:
    total = 0
    for link in _chain(exc):
        total += _frames(link.__traceback__, MAX_FRAMES - total)
        if total > MAX_FRAMES:
            return True
    return False


def _cut(tb: TracebackType | None) -> tuple[TracebackType | None, int]:
    """Keep the first and last KEEP_FRAMES frames of ``tb`` (relinked); return it and how many went."""
    nodes: list[TracebackType] = []
    while tb is not None:
        nodes.append(tb)
        tb = tb.tb_next
    if len(nodes) <= 2 * KEEP_FRAMES:
        return (nodes[0] if nodes else None), 0
    nodes[KEEP_FRAMES - 1].tb_next = nodes[-KEEP_FRAMES]
    return nodes[0], len(nodes) - 2 * KEEP_FRAMES


def trim(exc: BaseException) -> str | None:
    """Cut ``exc`` (in place) down to a reportable size; a note on what went, or None if it fit."""
    if not _oversized(exc):
        return None
    links = _chain(exc)
    dropped_frames = 0
    for link in links[:KEEP_LINKS]:
        head, dropped = _cut(link.__traceback__)
        link.__traceback__ = head
        dropped_frames += dropped
    last = links[min(KEEP_LINKS, len(links)) - 1]
    last.__cause__ = None
    last.__context__ = None
    dropped_links = max(0, len(links) - KEEP_LINKS)
    return (
        f"report cut down by tests/report_guard.py: {dropped_frames} middle frames of the kept tracebacks "
        f"and {dropped_links} older links of a {len(links)}-link exception chain are not shown "
        f"(the outermost {KEEP_LINKS} links, each with its first and last {KEEP_FRAMES} frames, are)"
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Trim the exception before the report (and its formatted traceback) is built from it."""
    if call.excinfo is not None:
        note = trim(call.excinfo.value)
        if note is not None:
            exc = call.excinfo.value
            call.excinfo = pytest.ExceptionInfo.from_exc_info((type(exc), exc, exc.__traceback__))
            item.add_report_section(call.when, "report_guard", note)
    return (yield)
