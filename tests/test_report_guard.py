"""A failing test with an enormous exception chain still gets a short report (tests/report_guard.py).

The failing test runs in a pytest subprocess: 60 chained exceptions of ~600 frames each, about
36,000 frames, which plain pytest formats for over a minute of CPU into megabytes of report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from report_guard import KEEP_FRAMES, MAX_FRAMES, trim

TESTS = Path(__file__).resolve().parent

DEEP_FAILURE = """
import sys


def _deep(n):
    return _deep(n - 1) if n else 1 / 0


def _chain(k):
    if k == 0:
        _deep(600)
    try:
        _chain(k - 1)
    except ZeroDivisionError:
        _deep(600)


def test_deep_chain():
    sys.setrecursionlimit(10000)
    _chain(60)


def test_small_failure():
    assert [1, 2] == [1, 3]
"""


def test_deep_failure_report_is_short(tmp_path: Path) -> None:
    (tmp_path / "test_deep.py").write_text(DEEP_FAILURE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "report_guard",
            "-p",
            "no:cacheprovider",
            "-q",
            "test_deep.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard only: unguarded, this report takes minutes on a loaded machine
    )
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-3000:]
    assert "2 failed" in out.splitlines()[-1]
    assert "61-link exception chain" in out
    assert "ZeroDivisionError: division by zero" in out
    # The report's size is the load-independent measure: the full one runs to megabytes.
    assert len(out) < 60_000, len(out)
    assert "assert [1, 2] == [1, 3]" in out  # an ordinary failure is reported in full


def _raise_chain(links: int, depth: int) -> BaseException:
    def deep(n: int) -> None:
        if n:
            deep(n - 1)
        else:
            raise ValueError("bottom")

    def chain(k: int) -> None:
        if k == 0:
            deep(depth)
        try:
            chain(k - 1)
        except ValueError:
            deep(depth)

    try:
        chain(links)
    except ValueError as exc:
        return exc
    raise AssertionError("no exception")


def _frames(exc: BaseException | None) -> int:
    tb = exc.__traceback__ if exc else None
    count = 0
    while tb is not None:
        count += 1
        tb = tb.tb_next
    return count


def test_trim_keeps_ends_and_leaves_small_exceptions_alone() -> None:
    small = _raise_chain(2, 5)
    assert trim(small) is None
    assert small.__context__ is not None and _frames(small) > 5

    big = _raise_chain(20, 100)
    assert _frames(big) > MAX_FRAMES // 4
    note = trim(big)
    assert note is not None and "21-link exception chain" in note
    assert _frames(big) == 2 * KEEP_FRAMES
    second = big.__context__
    assert second is not None and _frames(second) == 2 * KEEP_FRAMES
    third = second.__context__
    assert third is not None and third.__context__ is None and third.__cause__ is None
    tb = big.__traceback__
    assert tb is not None and tb.tb_frame.f_code.co_name == "_raise_chain"
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_lineno == tb.tb_frame.f_code.co_firstlineno + 4  # still ends at the raise
