"""Task kinds that test what a single question cannot: follow-up questions and tools.

``followup``
    A ticket export, one record per line; three questions about it asked one after another
    (a total, a count, a maximum, each for another region and status). A session answers the
    second and third from what its REPL kept (the parsed rows); a fresh run per question parses
    the whole context again. Each turn is graded exactly (:class:`~.graders.ExactInteger`).
``lookup``
    Shipment lines name the warehouse each left from; which city a warehouse is in is not in the
    context but behind a tool (``warehouse_city(code)``, a :class:`~.base.LookupTool`). The
    answer, the units shipped from one city's warehouses, needs a tool call per warehouse.

Corpora are pure functions of ``(kind, size, seed)`` drawn with :mod:`.corpus`'s stable draws, like
the single-question kinds of :mod:`.tasks`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from .base import Grader, LookupTool
from .corpus import assemble, below, pick
from .graders import ExactInteger

__all__ = ["CONVERSATION_KINDS", "REGIONS", "STATUSES", "Conversation"]

REGIONS = ("north", "south", "east", "west", "central")
STATUSES = ("open", "waiting", "solved", "closed")
_CITIES = ("Lisbon", "Oslo", "Quito", "Hanoi", "Perth", "Accra")


@dataclasses.dataclass(frozen=True)
class Conversation:
    """A generated multi-question (or tool) task: every question with its answer and grader."""

    queries: tuple[str, ...]
    context: str
    answers: tuple[str, ...]
    graders: tuple[Grader, ...]
    tools: tuple[LookupTool, ...] = ()


def _pairs(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """``count`` different (region, status) pairs."""
    chosen: list[tuple[str, str]] = []
    while len(chosen) < count:
        pair = (pick(rng, REGIONS), pick(rng, STATUSES))
        if pair not in chosen:
            chosen.append(pair)
    return chosen


def _followup(rng: random.Random, size: int) -> Conversation:
    (r1, s1), (r2, s2), (r3, s3) = _pairs(rng, 3)
    lines: list[str] = []
    total = count = 0
    largest = 0
    used = 0
    number = 7_000_000 + below(rng, 1_000_000)
    while True:
        b = rng.randbytes(4)
        region, status, qty = REGIONS[b[0] % 5], STATUSES[b[1] % 4], 1 + (b[2] * 256 + b[3]) % 500
        line = f"ticket=T-{number} region={region} status={status} qty={qty}\n"
        if used + len(line) > size:
            break
        lines.append(line)
        used += len(line)
        number += 1
        total += qty if (region, status) == (r1, s1) else 0
        count += (region, status) == (r2, s2)
        if (region, status) == (r3, s3):
            largest = max(largest, qty)
    lines.append("." * (size - used))
    queries = (
        "The context is a ticket export, one record per line. What is the total qty of all records "
        f"with region={r1} and status={s1}? Answer with the integer only.",
        f"Same export: how many records have region={r2} and status={s2}? Answer with the integer only.",
        f"Same export: what is the largest qty of any record with region={r3} and status={s3}? "
        "Answer with the integer only (0 if there is none).",
    )
    answers = (total, count, largest)
    return Conversation(queries, "".join(lines), tuple(map(str, answers)), tuple(map(ExactInteger, answers)))


def _lookup(rng: random.Random, size: int) -> Conversation:
    warehouses = [f"W-{101 + i}" for i in range(24)]
    cities = {code: _CITIES[below(rng, len(_CITIES))] for code in warehouses}
    city = pick(rng, sorted(set(cities.values())))
    planted = []
    total = 0
    for i in range(min(3_000, max(8, size // 3_000))):
        code = warehouses[below(rng, len(warehouses))]
        units = 1 + below(rng, 90)
        planted.append(f"shipment=S-{10_001 + i} warehouse={code} units={units}\n")
        total += units if cities[code] == city else 0
    tool = LookupTool(
        "warehouse_city",
        "The city a warehouse is in, by its code (such as 'W-101').",
        "code",
        tuple(sorted(cities.items())),
    )
    query = (
        "Shipment lines in the context name the warehouse each left from; the context does not say "
        "where warehouses are, the warehouse_city tool does. How many units in total were shipped "
        f"from warehouses in {city}? Answer with the integer only."
    )
    context = assemble(rng, planted, size)
    return Conversation((query,), context, (str(total),), (ExactInteger(total),), (tool,))


CONVERSATION_KINDS: dict[str, Callable[[random.Random, int], Conversation]] = {
    "followup": _followup,
    "lookup": _lookup,
}
"""Kinds with several questions or with tools, by name: ``(rng, size) -> Conversation``."""
