"""Exact graders: one right value, nothing around it.

A score that half-credits "The answer is probably 42 or 43" cannot separate a REPL quirk from a
model's hedging, so both graders here accept exactly one value. The normalisation is fixed and
small, and part of the grader's version (a change to it is a new version, recorded in every
:class:`~rlm_compat.research.base.Grade`):

1. ``None`` (the run gave no final answer) fails.
2. Surrounding whitespace is removed (``str.strip()``).
3. One pair of matching surrounding quotes or backticks (``"x"``, ``'x'``, ```` `x` ````) is
   removed, then whitespace again.
4. What is left must be the expected value exactly: for :class:`ExactInteger`, a base-10 integer
   written with ASCII digits and an optional sign (no separators, no decimals, no unit) equal to the
   expected number; for :class:`ExactText`, the expected text, case included.

So extra prose ("The code is X7Q2"), a trailing period, two candidates ("X7Q2 or X7Q3") and an
empty answer all fail, each with a reason saying which rule.
"""

from __future__ import annotations

import dataclasses
import re

from .base import Grade

__all__ = ["ExactInteger", "ExactText", "normalise_answer"]

_QUOTES = "\"'`"
_INTEGER = re.compile(r"[+-]?[0-9]+")
_SHOWN = 80


def normalise_answer(answer: str) -> str:
    """Steps 2 and 3 of the module rules: trimmed, one pair of surrounding quotes removed."""
    text = answer.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    return text


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


@dataclasses.dataclass
class ExactInteger:
    """Passes only the expected integer (see the module rules)."""

    expected: int
    name: str = dataclasses.field(default="exact-integer", init=False)
    version: str = dataclasses.field(default="1", init=False)

    def grade(self, answer: str | None) -> Grade:
        if answer is None:
            return self._verdict(False, "no final answer")
        text = normalise_answer(answer)
        if not text:
            return self._verdict(False, "empty answer")
        if not _INTEGER.fullmatch(text):
            return self._verdict(False, f"not a single integer: {_shown(text)}")
        if int(text) != self.expected:
            return self._verdict(False, f"wrong value: expected {self.expected}, got {int(text)}")
        return self._verdict(True, "exact match")

    def _verdict(self, passed: bool, reason: str) -> Grade:
        return Grade(passed=passed, reason=reason, grader=self.name, grader_version=self.version)


@dataclasses.dataclass
class ExactText:
    """Passes only the expected text, case-sensitive (see the module rules)."""

    expected: str
    name: str = dataclasses.field(default="exact-text", init=False)
    version: str = dataclasses.field(default="1", init=False)

    def __post_init__(self) -> None:
        if normalise_answer(self.expected) != self.expected or not self.expected:
            raise ValueError(
                f"expected text {self.expected!r} is not in normal form; no answer could match it"
            )

    def grade(self, answer: str | None) -> Grade:
        if answer is None:
            return self._verdict(False, "no final answer")
        text = normalise_answer(answer)
        if not text:
            return self._verdict(False, "empty answer")
        if text == self.expected:
            return self._verdict(True, "exact match")
        if self.expected in text:
            return self._verdict(False, f"extra text around the expected value: {_shown(text)}")
        return self._verdict(False, f"wrong value: expected {self.expected!r}, got {_shown(text)}")

    def _verdict(self, passed: bool, reason: str) -> Grade:
        return Grade(passed=passed, reason=reason, grader=self.name, grader_version=self.version)
