"""Generated tasks in the style of the RLM paper's families (Zhang, Kraska, Khattab, arXiv 2512.24601).

The paper scales three tasks from 2^13 to 2^18 tokens (Fig. 1) and reports OOLONG and OOLONG-Pairs
in Table 1; its data (RULER's haystacks, OOLONG's ``trec_coarse`` split) are not ours to ship, so
these generators make tasks of the same *shape* whose answer keys are exact by construction:

``sniah``
    RULER's single needle: one line ``One of the special magic numbers for <key> is: <number>.``
    in unrelated prose; the answer is the number (:class:`~.graders.ExactText`). O(1) work.
``oolong``
    OOLONG-style aggregation: every line is a labelled question record (``Date || User ||
    Instance || Label``, the six ``trec_coarse`` labels); the answer is how many records of one
    month carry one label. The labels are in the data (OOLONG's model must infer them), so the
    key is exact; graded as the paper grades numeric answers, ``0.75 ** |y - y_hat|``
    (:class:`~.graders.NumericScore`; a pass is the exact count). O(n) work.
``pairs``
    OOLONG-Pairs-style: the same records; the answer lists every pair of user ids where both
    users have a record with one (rare) label, graded by F1 over the pairs
    (:class:`~.graders.PairsF1`; a pass is F1 = 1). O(n^2) pairs of users to consider.

Sizes are characters like every task here; at about 4 characters a token, 2^13 .. 2^18 tokens are
the :data:`PAPER_SIZES` 32 768 .. 1 048 576 characters (and 2^20 tokens, 4 194 304 characters,
"beyond"). Every draw goes through :mod:`.corpus`, so a corpus is byte-identical on 3.10 - 3.13.
"""

from __future__ import annotations

import itertools
import random

from .base import Grader
from .corpus import FILLER_WORDS, assemble, below, filler, pick
from .graders import ExactText, NumericScore, PairsF1

__all__ = ["LABELS", "PAPER_KINDS", "PAPER_SIZES", "RARE_LABEL", "format_pairs"]

PAPER_SIZES: dict[str, int] = {f"2^{n}t": 4 * 2**n for n in (13, 14, 15, 16, 17, 18, 20)}
"""Paper-scale sizes: ``2^13t`` is 2^13 tokens at 4 characters a token (32 768 characters)."""

LABELS = (
    "abbreviation",
    "entity",
    "description and abstract concept",
    "human being",
    "location",
    "numeric value",
)
"""The six coarse labels of TREC question classification (OOLONG's ``trec_coarse`` split)."""

RARE_LABEL = "abbreviation"
"""The pairs task's label: only some users ever have it, so the pair set is neither empty nor all."""

_Generated = tuple[str, str, str, Grader]
_COMMON = LABELS[1:]


def _shuffle(rng: random.Random, items: list[str]) -> None:
    for i in range(len(items) - 1, 0, -1):
        j = below(rng, i + 1)
        items[i], items[j] = items[j], items[i]


def _sniah(rng: random.Random, size: int) -> _Generated:
    key = f"{pick(rng, FILLER_WORDS)}-{pick(rng, FILLER_WORDS)}"
    number = str(1_000_000 + below(rng, 9_000_000))
    needle = f"One of the special magic numbers for {key} is: {number}.\n"
    query = (
        f"What is the special magic number for {key} mentioned in the provided text? "
        "Answer with the number only."
    )
    return query, assemble(rng, [needle], size), number, ExactText(number)


def _users(rng: random.Random, count: int) -> list[int]:
    seen: set[int] = set()
    while len(seen) < count:
        seen.add(10_000 + below(rng, 90_000))
    return sorted(seen)


def _record(rng: random.Random, user: int, label: str) -> str:
    b = rng.randbytes(12)
    words = " ".join(FILLER_WORDS[x] for x in b[3 : 3 + 5 + b[2] % 5])
    return (
        f"Date: 2023-{1 + b[0] % 12:02d}-{1 + b[1] % 28:02d} || User: {user} || "
        f"Instance: {words[0].upper()}{words[1:]}? || Label: {label}\n"
    )


def _oolong(rng: random.Random, size: int) -> _Generated:
    users = _users(rng, min(200, 20 + size // 20_000))
    label, month = pick(rng, LABELS), 1 + below(rng, 12)
    lines: list[str] = []
    used = count = 0
    prefix = f"Date: 2023-{month:02d}-"
    while True:
        line = _record(rng, users[below(rng, len(users))], LABELS[below(rng, len(LABELS))])
        if used + len(line) > size - 1:
            break
        lines.append(line)
        used += len(line)
        if line.startswith(prefix) and line.endswith(f"|| Label: {label}\n"):
            count += 1
    lines.append(filler(rng, size - used))
    query = (
        "Every line of the context is a labelled question record: Date || User || Instance || Label. "
        f"How many records dated in 2023-{month:02d} have the label '{label}'? "
        "Answer with the integer only."
    )
    return query, "".join(lines), str(count), NumericScore(count)


def _pairs(rng: random.Random, size: int) -> _Generated:
    users = _users(rng, min(40, 8 + size // 40_000))
    chosen = sorted(u for u in users if below(rng, 2) == 0)
    if len(chosen) < 2:
        chosen = users[:2]
    qualifying = set(chosen)
    planted = [_record(rng, user, RARE_LABEL) for user in chosen]  # each chosen user has one
    used = sum(len(line) for line in planted)
    lines: list[str] = []
    while True:
        user = users[below(rng, len(users))]
        rare = user in qualifying and below(rng, 20) == 0
        line = _record(rng, user, RARE_LABEL if rare else pick(rng, _COMMON))
        if used + len(line) > size - 1:
            break
        lines.append(line)
        used += len(line)
    lines += planted
    _shuffle(rng, lines)
    lines.append(filler(rng, size - used))
    expected = list(itertools.combinations(chosen, 2))
    query = (
        "Every line of the context is a labelled question record: Date || User || Instance || Label. "
        f"List every pair of user IDs where both users have at least one record with the label "
        f"'{RARE_LABEL}'. Write each pair once as (smaller ID, larger ID), one pair per line."
    )
    return query, "".join(lines), format_pairs(expected), PairsF1(frozenset(expected))


def format_pairs(pairs: list[tuple[int, int]]) -> str:
    """The answer format of the pairs task: ``(a, b)`` lines, smaller id first, sorted."""
    return "\n".join(f"({a}, {b})" for a, b in sorted(pairs))


PAPER_KINDS = {"sniah": _sniah, "oolong": _oolong, "pairs": _pairs}
"""The paper-style kinds, merged into :data:`~.tasks.KINDS`."""
