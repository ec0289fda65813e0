"""The task kinds and :class:`GeneratedTask`, the suite's task spec.

Four kinds, each exercising what RLM transcripts do with a long context:

``needle``
    One memo line gives the secret code of the project asked for; many others give codes of
    projects with near-identical names. Answer: the code (:class:`~.graders.ExactText`).
``aggregate``
    The whole context is an order export, one record per line; the answer is the total ``qty``
    of the records with a given region and status (:class:`~.graders.ExactInteger`).
``multihop``
    Routing notes link keys (``key K-1 leads to key K-2``), registry entries give values to the
    last key of each chain; the answer is the value reached from a start key after four hops,
    among distractor chains (:class:`~.graders.ExactText`).
``combine``
    Incident reports scattered through prose give visitor counts *in words* (``forty-two``),
    next to maintenance notes with other number words; the answer is the total. Reading the
    counts is the per-chunk work a model hands to sub-calls (:class:`~.graders.ExactInteger`).

The paper's families (``sniah``, ``oolong``, ``pairs``) live in :mod:`.paper_tasks`; the kinds
with follow-up questions or tools (``followup``, ``lookup``) in :mod:`.conversation_tasks`.

Every corpus is exactly ``size`` characters and a pure function of ``(kind, size, seed)``
(:mod:`.corpus` explains how that holds across Python versions). Building is cached per spec, so
a grid that runs one task under many configurations generates its corpus once per process.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
import re
from collections.abc import Callable

from ..shared.tooling_errors import ToolUsageError
from .base import Grader, TaskInstance
from .conversation_tasks import CONVERSATION_KINDS, Conversation
from .corpus import FILLER_WORDS, assemble, below, derive_rng, filler, number_words, pick, sha256_text
from .graders import ExactInteger, ExactText
from .paper_tasks import PAPER_KINDS, PAPER_SIZES

__all__ = [
    "KINDS",
    "MIN_SIZE",
    "SIZES",
    "GeneratedTask",
    "size_label",
    "task_from_id",
]

SIZES: dict[str, int] = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
"""The standard context sizes, in characters, by the label task ids use."""

MIN_SIZE = 2_000
"""Below this the planted lines of a task leave too little filler to hide them in."""

_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
_REGIONS = ("north", "south", "east", "west", "central")
_STATUSES = ("shipped", "pending", "returned", "cancelled")
_PLACES = ("north gate", "museum hall", "harbour pier", "station lobby", "garden path", "east wing")
_VALUE_WORDS = ("amber", "cobalt", "crimson", "indigo", "jade", "ochre", "scarlet", "teal", "umber")
MULTIHOP_HOPS = 4


@dataclasses.dataclass(frozen=True)
class _Built:
    """A generated task: its instance plus the one right answer."""

    instance: TaskInstance
    answer: str
    grader: Grader
    turn_graders: tuple[Grader, ...]
    answers: tuple[str, ...]


def size_label(size: int) -> str:
    """``10k``, ``1m``... as in task ids; the paper's token sizes as ``2^13t`` (4 * 2^13
    characters, :data:`~.paper_tasks.PAPER_SIZES`); other sizes keep their digits (``2500``)."""
    for label, chars in PAPER_SIZES.items():
        if size == chars:
            return label
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    if size % 1_000 == 0:
        return f"{size // 1_000}k"
    return str(size)


def _parse_size(label: str) -> int:
    if label in PAPER_SIZES:
        return PAPER_SIZES[label]
    match = re.fullmatch(r"([1-9][0-9]*)([km]?)", label.lower())
    if match is None:
        raise ToolUsageError(f"size {label!r}: write characters as digits with an optional k or m (100k)")
    return int(match.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2)]


@dataclasses.dataclass(frozen=True)
class GeneratedTask:
    """A task spec (:class:`~rlm_compat.tools.research.base.TaskSpec`): kind, size and seed name it.

    ``task_id`` is ``<kind>-<size label>-s<seed>`` (``needle-100k-s0``); :func:`task_from_id`
    reads it back, so a grid record names its task without the suite.
    """

    kind: str
    size: int
    seed: int = 0
    task_id: str = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS and self.kind not in CONVERSATION_KINDS:
            known = sorted([*KINDS, *CONVERSATION_KINDS])
            raise ToolUsageError(f"unknown task kind {self.kind!r}; known kinds: {known}")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < MIN_SIZE:
            raise ToolUsageError(f"task size must be an integer >= {MIN_SIZE} characters, not {self.size!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ToolUsageError(f"task seed must be an integer >= 0, not {self.seed!r}")
        object.__setattr__(self, "task_id", f"{self.kind}-{size_label(self.size)}-s{self.seed}")

    @property
    def grader(self) -> Grader:
        """The exact grader holding this task's answer (builds the corpus once, cached)."""
        return _build(self.kind, self.size, self.seed).grader

    @property
    def turn_graders(self) -> tuple[Grader, ...]:
        """One grader per question of the task (just :attr:`grader` for a single question)."""
        return _build(self.kind, self.size, self.seed).turn_graders

    @property
    def answer(self) -> str:
        """The one right answer (of the first question), as the grader expects it written."""
        return _build(self.kind, self.size, self.seed).answer

    @property
    def answers(self) -> tuple[str, ...]:
        """The right answer of every question, in order."""
        return _build(self.kind, self.size, self.seed).answers

    def build(self) -> TaskInstance:
        """The query and the context (cached per spec within a process)."""
        return _build(self.kind, self.size, self.seed).instance


def task_from_id(task_id: str) -> GeneratedTask:
    """The spec a task id names: ``needle-100k-s0`` -> GeneratedTask("needle", 100_000, 0)."""
    match = re.fullmatch(r"([a-z]+)-(2\^[0-9]+t|[0-9]+[km]?)-s([0-9]+)", task_id)
    if match is None:
        raise ToolUsageError(f"task id {task_id!r} is not of the form <kind>-<size>-s<seed> (needle-100k-s0)")
    return GeneratedTask(match.group(1), _parse_size(match.group(2)), int(match.group(3)))


@functools.lru_cache(maxsize=8)
def _build(kind: str, size: int, seed: int) -> _Built:
    rng = derive_rng(kind, size, seed)
    if kind in CONVERSATION_KINDS:
        made = CONVERSATION_KINDS[kind](rng, size)
    else:
        query, context, answer, grader = KINDS[kind](rng, size)
        made = Conversation((query,), context, (answer,), (grader,))
    if len(made.context) != size:  # a generator bug, never the caller's
        raise AssertionError(f"{kind} generator made {len(made.context)} characters instead of {size}")
    instance = TaskInstance(
        task_id=f"{kind}-{size_label(size)}-s{seed}",
        kind=kind,
        size=size,
        seed=seed,
        query=made.queries[0],
        context=made.context,
        corpus_sha256=sha256_text(made.context),
        followups=made.queries[1:],
        tools=made.tools,
    )
    return _Built(instance, made.answers[0], made.graders[0], made.graders, made.answers)


# --- generators: (rng, size) -> (query, context, answer, grader) --------------------------------

_Generated = tuple[str, str, str, Grader]


def _shuffle(rng: random.Random, items: list[str]) -> None:
    """Fisher-Yates on :func:`below` (``random.shuffle``'s algorithm is not a stability promise)."""
    for i in range(len(items) - 1, 0, -1):
        j = below(rng, i + 1)
        items[i], items[j] = items[j], items[i]


def _code(rng: random.Random) -> str:
    return "".join(_CODE_ALPHABET[b % len(_CODE_ALPHABET)] for b in rng.randbytes(8))


def _needle(rng: random.Random, size: int) -> _Generated:
    # Distractor names share the target's word and differ in digits: only an exact search works.
    word = pick(rng, FILLER_WORDS).upper()
    target = f"Project {word}-{1000 + below(rng, 9000)}"
    names = [target]
    seen = {target}
    while len(names) < min(2_000, max(4, size // 5_000)):
        stem = word if below(rng, 2) == 0 else pick(rng, FILLER_WORDS).upper()
        name = f"Project {stem}-{1000 + below(rng, 9000)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    codes = [_code(rng) for _ in names]
    lines = [f"Memo: the secret code for {n} is {c}.\n" for n, c in zip(names, codes, strict=True)]
    _shuffle(rng, lines)
    query = f"What is the secret code for {target}? Answer with the code only."
    return query, assemble(rng, lines, size), codes[0], ExactText(codes[0])


def _aggregate(rng: random.Random, size: int) -> _Generated:
    region, status = pick(rng, _REGIONS), pick(rng, _STATUSES)
    lines: list[str] = []
    total = used = 0
    order = 4_000_000 + below(rng, 1_000_000)
    full = False
    while not full:
        data = rng.randbytes(8 * 4096)
        for i in range(0, len(data), 8):
            b = data[i : i + 8]
            r, s, qty = _REGIONS[b[5] % 5], _STATUSES[b[6] % 4], 1 + b[7] % 50
            line = (
                f"2024-{1 + b[0] % 12:02d}-{1 + b[1] % 28:02d} {b[2] % 24:02d}:{b[3] % 60:02d}:"
                f"{b[4] % 60:02d} order=O-{order} region={r} status={s} qty={qty}\n"
            )
            if used + len(line) > size - 1:
                full = True
                break
            lines.append(line)
            used += len(line)
            order += 1
            if r == region and s == status:
                total += qty
    lines.append(filler(rng, size - used))
    query = (
        "The context is an order export, one record per line. What is the total qty of all "
        f"records with region={region} and status={status}? Answer with the integer only."
    )
    return query, "".join(lines), str(total), ExactInteger(total)


def _key(rng: random.Random, seen: set[str]) -> str:
    while True:
        key = f"K-{10_000 + below(rng, 90_000)}"
        if key not in seen:
            seen.add(key)
            return key


def _multihop(rng: random.Random, size: int) -> _Generated:
    seen: set[str] = set()
    values: set[str] = set()

    def chain(hops: int) -> tuple[list[str], str, list[str]]:
        keys = [_key(rng, seen) for _ in range(hops + 1)]
        while True:
            value = f"{pick(rng, _VALUE_WORDS)}-{100 + below(rng, 900)}"
            if value not in values:
                values.add(value)
                break
        lines = [f"Routing note: key {a} leads to key {b}.\n" for a, b in itertools.pairwise(keys)]
        lines.append(f"Registry entry: key {keys[-1]} holds the value {value}.\n")
        return keys, value, lines

    keys, answer, planted = chain(MULTIHOP_HOPS)
    for _ in range(min(3_000, max(4, size // 4_000))):
        planted += chain(1 + below(rng, MULTIHOP_HOPS))[2]
    _shuffle(rng, planted)
    query = (
        f"Start at key {keys[0]} and follow the 'leads to' links from key to key until you reach "
        "a key that holds a value. What is that value? Answer with the value only."
    )
    return query, assemble(rng, planted, size), answer, ExactText(answer)


_REPORTS = (
    "Incident report {rid}: the {place} sensor counted {n} visitors before noon.\n",
    "Incident report {rid}: staff at the {place} logged {n} visitors during the late shift.\n",
)
_NOTES = "Maintenance note {rid}: desk {n} at the {place} was repainted.\n"


def _combine(rng: random.Random, size: int) -> _Generated:
    reports = min(4_000, max(6, size // 2_500))
    planted: list[str] = []
    total = 0
    for i in range(reports):
        n = 1 + below(rng, 99)
        total += n
        template = _REPORTS[below(rng, len(_REPORTS))]
        planted.append(template.format(rid=f"IR-{i + 1:04d}", place=pick(rng, _PLACES), n=number_words(n)))
    for i in range(reports // 2):
        n = 1 + below(rng, 99)
        planted.append(_NOTES.format(rid=f"MN-{i + 1:04d}", place=pick(rng, _PLACES), n=number_words(n)))
    _shuffle(rng, planted)
    query = (
        "Incident reports throughout the context each give a visitor count written in words. "
        "What is the total number of visitors over all incident reports? Answer with the integer only."
    )
    return query, assemble(rng, planted, size), str(total), ExactInteger(total)


KINDS: dict[str, Callable[[random.Random, int], _Generated]] = {
    "needle": _needle,
    "aggregate": _aggregate,
    "multihop": _multihop,
    "combine": _combine,
    **PAPER_KINDS,
}
"""Task kinds by name; each generator is ``(rng, size) -> (query, context, answer, grader)``."""
