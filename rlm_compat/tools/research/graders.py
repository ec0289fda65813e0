"""Exact graders: one right value, nothing around it.

A score that half-credits "The answer is probably 42 or 43" cannot separate a REPL quirk from a
model's hedging, so both graders here accept exactly one value. The normalisation is fixed and
small, and part of the grader's version (a change to it is a new version, recorded in every
:class:`~rlm_compat.tools.research.base.Grade`):

1. ``None`` (the run gave no final answer) fails.
2. Surrounding whitespace is removed (``str.strip()``).
3. One pair of matching surrounding quotes or backticks (``"x"``, ``'x'``, or ``x`` in backticks) is
   removed, then whitespace again.
4. What is left must be the expected value exactly: for :class:`ExactInteger`, a base-10 integer
   written with ASCII digits and an optional sign (no separators, no decimals, no unit) equal to the
   expected number; for :class:`ExactText`, the expected text, case included.

So extra prose ("The code is X7Q2"), a trailing period, two candidates ("X7Q2 or X7Q3") and an
empty answer all fail, each with a reason saying which rule.

The paper-style tasks (:mod:`.paper_tasks`) are graded as the RLM paper grades them, with a score
beside the verdict: :class:`NumericScore` gives ``0.75 ** |y - y_hat|`` (OOLONG's metric for
numeric answers, read under the rules above) and :class:`PairsF1` the F1 of the listed pairs. A
pass is still the exact answer (score 1).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Set

from .base import Grade

__all__ = ["ExactInteger", "ExactText", "NumericScore", "PairsF1", "normalise_answer", "parse_pairs"]

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


@dataclasses.dataclass
class NumericScore:
    """OOLONG's numeric metric: score ``0.75 ** |expected - answer|``; passes only the exact value.

    The answer is read under the module rules (a single integer, nothing around it); anything else
    scores 0, as an unparsable answer does in OOLONG's harness.
    """

    expected: int
    name: str = dataclasses.field(default="oolong-numeric", init=False)
    version: str = dataclasses.field(default="1", init=False)

    def grade(self, answer: str | None) -> Grade:
        if answer is None:
            return self._verdict(0.0, "no final answer")
        text = normalise_answer(answer)
        if not _INTEGER.fullmatch(text):
            return self._verdict(0.0, f"not a single integer: {_shown(text)}")
        off = abs(int(text) - self.expected)
        if off == 0:
            return self._verdict(1.0, "exact match")
        return self._verdict(0.75**off, f"off by {off}: expected {self.expected}, got {int(text)}")

    def _verdict(self, score: float, reason: str) -> Grade:
        return Grade(
            passed=score == 1.0,
            reason=reason,
            grader=self.name,
            grader_version=self.version,
            score=round(score, 6),
        )


_PAIR = re.compile(r"\(\s*([0-9]+)\s*,\s*([0-9]+)\s*\)")


def parse_pairs(answer: str) -> set[tuple[int, int]]:
    """Every ``(a, b)`` in ``answer`` as an unordered pair (smaller first); a pair of one id twice
    is not a pair and is dropped."""
    found = {(int(a), int(b)) for a, b in _PAIR.findall(answer)}
    return {(min(a, b), max(a, b)) for a, b in found if a != b}


@dataclasses.dataclass
class PairsF1:
    """OOLONG-Pairs' metric: F1 of the pairs listed against the expected set; passes at F1 = 1.

    Pairs are read as ``(a, b)`` anywhere in the answer, in either order, duplicates once; other
    text is ignored (the metric is over the pairs, not the wording).
    """

    expected: Set[tuple[int, int]]
    name: str = dataclasses.field(default="pairs-f1", init=False)
    version: str = dataclasses.field(default="1", init=False)

    def grade(self, answer: str | None) -> Grade:
        if answer is None:
            return self._verdict(0.0, "no final answer")
        got = parse_pairs(answer)
        right = len(got & set(self.expected))
        if not got or not right:
            return self._verdict(0.0, f"{len(got)} pairs listed, none of the {len(self.expected)} expected")
        precision, recall = right / len(got), right / len(self.expected)
        f1 = 2 * precision * recall / (precision + recall)
        if f1 == 1.0:
            return self._verdict(1.0, f"all {right} pairs, nothing else")
        return self._verdict(
            f1, f"{right} of {len(self.expected)} expected pairs, {len(got) - right} wrong: F1 {f1:.3f}"
        )

    def _verdict(self, score: float, reason: str) -> Grade:
        return Grade(
            passed=score == 1.0,
            reason=reason,
            grader=self.name,
            grader_version=self.version,
            score=round(score, 6),
        )
