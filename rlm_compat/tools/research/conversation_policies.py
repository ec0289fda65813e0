"""Scripted policies of the follow-up and tool kinds (:mod:`.conversation_tasks`).

``followup``: the policy answers whichever of the task's questions the node was asked (the newest
one in its first user message: a session's later turn carries a note of earlier turns too). Its
code parses the rows only when no ``rows`` variable exists yet (``try: rows / except NameError``),
as a model told that its REPL kept its variables would: in a session the later turns reuse the
rows, a fresh run per question parses again. ``lookup``: the policy extracts each shipment, asks
the ``warehouse_city`` tool once per warehouse and sums the units of the asked city.

Like :mod:`.task_policies`, they read only the questions, never the context or the answers.
"""

from __future__ import annotations

import re

from ..shared.tooling_errors import ToolUsageError
from .base import TaskInstance
from .conversation_tasks import REGIONS, STATUSES
from .scripted_policy import Agent, Conversation, Move, PolicyState, ScriptedPolicy

__all__ = ["FollowupPolicy", "LookupPolicy"]

_PEEK = "print(len(context))\nprint(context[:300])"
_PARSE = (
    "try:\n"
    "    rows\n"
    "except NameError:\n"
    '    rows = re.findall(r"region=(\\w+) status=(\\w+) qty=(\\d+)", context)\n'
    '    print("parsed", len(rows), "rows")\n'
)
_QUESTION = re.compile(
    r"(total qty|how many records|largest qty)[^=]*"
    + f"region=({'|'.join(REGIONS)}) and status=({'|'.join(STATUSES)})"
    + r"\?"
)
_ANSWER = re.compile(r"answer: (\d+)")


def _peek(state: PolicyState, first: bool) -> Move | None:
    if first and "no_peek" not in state.avoid and not state.done["peek"] and state.failures["peek"] < 2:
        return Move("peek", _PEEK)
    return None


class _PrintedAnswer:
    """Both agents print ``answer: N`` after computing it: that is what they give up with."""

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        found = _ANSWER.search(observation)
        if found is not None:
            state.facts["answer"] = found.group(1)

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("answer", "0")


class _FollowupAgent(_PrintedAnswer):
    def __init__(self, measure: str, region: str, status: str, first: bool) -> None:
        self.measure, self.region, self.status, self.first = measure, region, status, first

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        peek = _peek(state, self.first)
        if peek is not None:
            return peek
        match = f'r == "{self.region}" and s == "{self.status}"'
        if state.failures["select"] < 2:
            picked = f"picked = [int(q) for r, s, q in rows if {match}]\n"
            result = {
                "total qty": "sum(picked)",
                "how many records": "len(picked)",
                "largest qty": "max(picked) if picked else 0",
            }[self.measure]
            code = _PARSE + picked + f"answer = {result}\n" + 'print("rows:", len(rows), "answer:", answer)'
            return Move("select", code, final_var="answer")
        if state.failures["loop"] < 2:
            update = {
                "total qty": "answer = answer + int(q)",
                "how many records": "answer = answer + 1",
                "largest qty": "answer = max(answer, int(q))",
            }[self.measure]
            code = (
                _PARSE
                + "answer = 0\n"
                + "for row in rows:\n"
                + "    r, s, q = row[0], row[1], row[2]\n"
                + f"    if {match}:\n"
                + f"        {update}\n"
                + 'print("rows:", len(rows), "answer:", answer)'
            )
            return Move("loop", code, final_var="answer")
        return None


class FollowupPolicy(ScriptedPolicy):
    """followup: the asked question's figure from rows parsed once per REPL."""

    kind = "followup"

    def __init__(
        self,
        query: str,
        *,
        max_errors: int | None = None,
        variant: int = 0,
        followups: tuple[str, ...] = (),
    ) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        self.queries = (query, *followups)
        self.questions = []
        for text in self.queries:
            found = _QUESTION.search(text)
            if found is None:
                raise ToolUsageError(f"the followup policy cannot read a question from {text[:120]!r}")
            self.questions.append((found.group(1), found.group(2), found.group(3)))

    @classmethod
    def for_task(
        cls, task: TaskInstance, *, max_errors: int | None = None, variant: int = 0
    ) -> FollowupPolicy:
        return cls(task.query, max_errors=max_errors, variant=variant, followups=task.followups)

    def agent_for(self, query: str) -> Agent | None:
        """The newest of the task's questions in ``query`` (a later turn's message may quote
        earlier ones in its note of the session's history)."""
        places = [(query.rfind(q), i) for i, q in enumerate(self.queries) if q in query]
        if not places:
            return None
        _, index = max(places)
        return _FollowupAgent(*self.questions[index], first=index == 0)


class _LookupAgent(_PrintedAnswer):
    def __init__(self, city: str) -> None:
        self.city = city

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        peek = _peek(state, True)
        if peek is not None:
            return peek
        if "scope" not in state.avoid and not state.failures["lookup"]:
            code = (
                'pairs = re.findall(r"warehouse=(W-[0-9]+) units=([0-9]+)", context)\n'
                "cities = {code: warehouse_city(code) for code in sorted(set(c for c, u in pairs))}\n"
                f'answer = sum(int(u) for c, u in pairs if cities[c] == "{self.city}")\n'
                'print(len(pairs), "shipments;", len(cities), "warehouses; answer:", answer)'
            )
            return Move("lookup", code, final_var="answer")
        if state.failures["lookup_loop"] < 3:  # plain loops: no comprehension scope to trip over
            code = (
                'pairs = re.findall(r"warehouse=(W-[0-9]+) units=([0-9]+)", context)\n'
                "codes = []\n"
                "for pair in pairs:\n"
                "    if pair[0] not in codes:\n"
                "        codes.append(pair[0])\n"
                "cities = dict(zip(codes, map(warehouse_city, codes)))\n"
                "answer = 0\n"
                "for pair in pairs:\n"
                f'    if cities[pair[0]] == "{self.city}":\n'
                "        answer = answer + int(pair[1])\n"
                'print(len(pairs), "shipments;", len(cities), "warehouses; answer:", answer)'
            )
            return Move("lookup_loop", code, final_var="answer")
        return None


class LookupPolicy(ScriptedPolicy):
    """lookup: one tool call per warehouse named in the context, then a filtered sum."""

    kind = "lookup"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        found = re.search(r"from warehouses in (\w+)\?", query)
        if found is None:
            raise ToolUsageError(f"the lookup policy cannot read the city from {query[:120]!r}")
        self.city = found.group(1)

    def root(self) -> Agent:
        return _LookupAgent(self.city)
