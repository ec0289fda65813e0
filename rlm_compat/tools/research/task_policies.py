"""One scripted policy per task kind, and :func:`policy_for` / :func:`client_for` to get one.

Each policy writes what models write in public RLM transcripts: it peeks at the context with
``import re`` on top (although ``re`` is injected), searches with regular expressions, defines
helper functions that read ``context``, chunks with comprehensions, counts with ``+=``, groups
with ``d[k] = v``, unpacks tuples, delegates chunks to batched or recursive sub-calls, and ends
with ``FINAL_VAR`` in the same reply as the code computing it. When an observation is an error it
retries the way the error suggests (:mod:`.policy`), and gives up after ``max_errors`` of them.

The policies read only the task's *query* (as a model would); the context reaches them only
through what their code prints, and sub-calls only through the prompts their own code wrote.
"""

from __future__ import annotations

import re

from ...clients import LLMClient
from ..shared.tooling_errors import ToolUsageError
from .base import TaskInstance
from .conversation_policies import FollowupPolicy, LookupPolicy
from .corpus import number_words
from .scripted_policy import Agent, Conversation, Move, PolicyState, ScriptedPolicy, last_marked

__all__ = [
    "AggregatePolicy",
    "CombinePolicy",
    "MultihopPolicy",
    "NeedlePolicy",
    "OolongPolicy",
    "PairsPolicy",
    "SniahPolicy",
    "client_for",
    "policy_for",
]

_PEEK = "print(len(context))\nprint(context[:400])"
_COUNT_WORDS = {number_words(n): n for n in range(100)}
"""How a model reads a count written in words (its English, not the task's data)."""


def _parse(pattern: str, query: str, kind: str) -> re.Match[str]:
    found = re.search(pattern, query)
    if found is None:
        raise ToolUsageError(f"the {kind} policy cannot read its parameters from the query {query[:120]!r}")
    return found


def _peek(state: PolicyState) -> Move | None:
    """Look at the start first, as nearly every transcript does (retried once if it failed)."""
    if "no_peek" not in state.avoid and not state.done["peek"] and state.failures["peek"] < 2:
        return Move("peek", _PEEK)
    return None


def _add(avoid: set[str], target: str, value: str) -> str:
    """``target += value``, or its spelled-out form once ``+=`` was refused."""
    return f"{target} = {target} + {value}" if "inplace" in avoid else f"{target} += {value}"


# --- needle -----------------------------------------------------------------------------------


class _NeedleAgent:
    def __init__(self, name: str) -> None:
        self.name = name
        self.pattern = f"secret code for {name} is ([A-Z0-9]+)"  # names are letters, digits, "-"

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        avoid = state.avoid
        peek = _peek(state)
        if peek is not None:
            return peek
        if "scope" not in avoid and not state.failures["helper"]:
            code = (
                "def find_code(name):\n"
                '    pattern = r"secret code for " + re.escape(name) + r" is ([A-Z0-9]+)"\n'
                "    return re.findall(pattern, context)\n"
                f"matches = find_code({self.name!r})\n"
                "print(matches)\n"
                "answer = matches[0]"
            )
            return Move("helper", code, final_var="answer")
        if not state.failures["search"]:
            code = f'matches = re.findall(r"{self.pattern}", context)\nprint(matches)\nanswer = matches[0]'
            return Move("search", code, final_var="answer")
        if "code" in state.facts:
            return Move("answer", text=f'FINAL("{state.facts["code"]}")')
        if not state.failures["window"] and not state.done["window"]:
            # the exact search found nothing: look around the name instead
            code = (
                f"idx = context.find({self.name!r})\nprint('WINDOW', context[max(0, idx - 100) : idx + 200])"
            )
            return Move("window", code)
        return None

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        if move.step == "window":
            found = re.search(self.pattern, observation)
            if found is not None:
                state.facts["code"] = found.group(1)

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("code", "not found")


class NeedlePolicy(ScriptedPolicy):
    """needle: a helper function searching ``context``; inline search; a window around the name."""

    kind = "needle"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        self.name = _parse(r"secret code for (.+?)\? Answer", query, self.kind).group(1)

    def root(self) -> Agent:
        return _NeedleAgent(self.name)


# --- aggregate --------------------------------------------------------------------------------

_ROWS = 'rows = re.findall(r"region=(\\w+) status=(\\w+) qty=(\\d+)", context)\n'


class _AggregateAgent:
    def __init__(self, region: str, status: str) -> None:
        self.region, self.status = region, status

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        avoid = state.avoid
        peek = _peek(state)
        if peek is not None:
            return peek
        unpack = "unpack" not in avoid
        loop = "for region, status, qty in rows:\n" if unpack else "for row in rows:\n"
        region, status, qty = ("region", "status", "qty") if unpack else ("row[0]", "row[1]", "row[2]")
        if "item_write" not in avoid and state.failures["tally"] < 2:
            # group every (region, status) pair, then read the one asked for
            code = (
                _ROWS
                + "totals = {}\n"
                + loop
                + f'    key = {region} + "/" + {status}\n'
                + f"    totals[key] = totals.get(key, 0) + int({qty})\n"
                + f'answer = totals.get("{self.region}/{self.status}", 0)\n'
                + 'print(len(rows), "rows;", answer)'
            )
            return Move("tally", code, final_var="answer")
        if state.failures["filter"] < 3:
            code = (
                _ROWS
                + "answer = 0\n"
                + loop
                + f'    if {region} == "{self.region}" and {status} == "{self.status}":\n'
                + f"        {_add(avoid, 'answer', f'int({qty})')}\n"
                + 'print(len(rows), "rows;", answer)'
            )
            return Move("filter", code, final_var="answer")
        return None

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        found = re.search(r"rows; (\d+)", observation)
        if found is not None:
            state.facts["total"] = found.group(1)

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("total", "0")


class AggregatePolicy(ScriptedPolicy):
    """aggregate: a dict of totals per (region, status); after refusals, one filtered counter."""

    kind = "aggregate"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        found = _parse(r"region=(\w+) and status=(\w+)\?", query, self.kind)
        self.region, self.status = found.group(1), found.group(2)

    def root(self) -> Agent:
        return _AggregateAgent(self.region, self.status)


# --- multihop ---------------------------------------------------------------------------------

_MAX_HOPS = 20


class _MultihopAgent:
    def __init__(self, start: str) -> None:
        self.start = start

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        avoid = state.avoid
        peek = _peek(state)
        if peek is not None:
            return peek
        if "scope" not in avoid and not state.failures["follow"]:
            # one helper that walks the whole chain
            unpack = "unpack" not in avoid
            code = (
                "def follow(start):\n"
                "    key = start\n"
                "    hops = 0\n"
                f"    while hops < {_MAX_HOPS}:\n"
                '        m = re.search(r"key " + key + r" leads to key (K-\\d+)", context)\n'
                "        if m is None:\n"
                "            break\n"
                "        key = m.group(1)\n"
                f"        {_add(avoid, 'hops', '1')}\n"
                "    return key, hops\n"
                + (
                    f"last, hops = follow({self.start!r})\n"
                    if unpack
                    else f"walk = follow({self.start!r})\nlast = walk[0]\nhops = walk[1]\n"
                )
                + 'found = re.search(r"key " + last + r" holds the value ([a-z]+-\\d+)", context)\n'
                "answer = found.group(1)\n"
                "print(last, hops, answer)"
            )
            return Move("follow", code, final_var="answer")
        key = state.facts.get("key", self.start)
        if "end" in state.facts:
            if state.failures["value"] >= 2:
                return None
            code = (
                f'm = re.search(r"key {key} holds the value ([a-z]+-\\d+)", context)\n'
                "answer = m.group(1)\n"
                "print(answer)"
            )
            return Move("value", code, final_var="answer")
        if state.done["hop"] >= _MAX_HOPS or state.failures["hop"] >= 3:
            return None
        # one link at a time, reading each answer before the next search
        code = (
            f'm = re.search(r"key {key} leads to key (K-\\d+)", context)\n'
            'print("NEXT", m.group(1) if m else "NONE")'
        )
        return Move("hop", code)

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        if move.step != "hop":
            return
        following = last_marked(observation, "NEXT")
        if following is None:
            return
        if following.strip() == "NONE":
            state.facts["end"] = state.facts.get("key", self.start)
        else:
            state.facts["key"] = following.strip()

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("key", self.start)


class MultihopPolicy(ScriptedPolicy):
    """multihop: a helper walking the chain; after an error, one link per reply."""

    kind = "multihop"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        self.start = _parse(r"Start at key (K-\d+)", query, self.kind).group(1)

    def root(self) -> Agent:
        return _MultihopAgent(self.start)


# --- combine ----------------------------------------------------------------------------------

SUBQUERY = (
    "How many visitors do the incident reports in this text count in total? "
    "The counts are written in words. Answer with one integer."
)
"""The per-chunk question the combine policy delegates (and recognises when it is asked it)."""

_COUNT = re.compile(r"(?:counted|logged) ([a-z]+(?:-[a-z]+)?) visitors")
_BIG_CHUNK = 50_000


def _sum_counts(words: list[str]) -> int:
    return sum(_COUNT_WORDS.get(w, 0) for w in words)


class _CombineAgent:
    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        avoid = state.avoid
        peek = _peek(state)
        if peek is not None:
            return peek
        if state.failures["map"] >= 3:
            return None
        chunk_chars = min(100_000, max(2_500, conversation.size // 4))
        per_chunk = max(10, chunk_chars // 80)
        lines = [f"question = {SUBQUERY!r}", 'lines = context.split("\\n")', f"per_chunk = {per_chunk}"]
        if "scope" in avoid:
            lines += [
                "chunks = []",
                "for i in range(0, len(lines), per_chunk):",
                '    chunks.append("\\n".join(lines[i : i + per_chunk]))',
            ]
        else:
            lines.append(
                'chunks = ["\\n".join(lines[i : i + per_chunk]) for i in range(0, len(lines), per_chunk)]'
            )
        if "batched" not in avoid and chunk_chars >= _BIG_CHUNK:
            # chunks too long for one prompt: each goes to a child RLM, all at once
            lines.append("answers = rlm_query_batched([question] * len(chunks), chunks)")
        elif "batched" not in avoid:
            if "scope" in avoid:
                lines += [
                    "prompts = []",
                    "for chunk in chunks:",
                    '    prompts.append(question + "\\n\\n" + chunk)',
                ]
            else:
                lines.append('prompts = [question + "\\n\\n" + chunk for chunk in chunks]')
            lines.append("answers = llm_query_batched(prompts)")
        else:
            lines += [
                "answers = []",
                "for chunk in chunks:",
                "    answers.append(recursive_llm(question, chunk))",
            ]
        lines += ["total = 0", "for answer in answers:"]
        if state.failures["map"]:
            # an answer was not a bare number last time: take the first number in each
            lines += [
                '    digits = re.findall(r"\\d+", answer)',
                "    if digits:",
                f"        {_add(avoid, 'total', 'int(digits[0])')}",
            ]
        else:
            lines.append(f"    {_add(avoid, 'total', 'int(answer.strip())')}")
        lines.append('print(len(chunks), "chunks; total", total)')
        return Move("map", "\n".join(lines), final_var="total")

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        found = re.search(r"chunks; total (\d+)", observation)
        if found is not None:
            state.facts["total"] = found.group(1)

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("total", "0")


class _CountChunkAgent:
    """A child RLM asked :data:`SUBQUERY`: find the counts with code, add them up "by reading"."""

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        if "sum" in state.facts:
            return Move("answer", text=f'FINAL("{state.facts["sum"]}")')
        if state.failures["find"] >= 3:
            return None
        code = (
            'found = re.findall(r"(?:counted|logged) ([a-z]+(?:-[a-z]+)?) visitors", context)\n'
            'print("FOUND", found)'
        )
        return Move("find", code)

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        listed = last_marked(observation, "FOUND")
        if listed is not None:
            state.facts["sum"] = str(_sum_counts(re.findall(r"'([a-z-]+)'", listed)))

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("sum", "0")


class CombinePolicy(ScriptedPolicy):
    """combine: chunk by lines, one sub-call per chunk (``llm_query_batched`` for short chunks,
    ``rlm_query_batched`` for long ones, ``recursive_llm`` in a loop when those are missing),
    add the answers up. It answers its own sub-calls too."""

    kind = "combine"

    def root(self) -> Agent:
        return _CombineAgent()

    def subtask(self, query: str) -> Agent | None:
        return _CountChunkAgent() if query == SUBQUERY else None

    def leaf(self, prompt: str) -> str:
        question, _, text = prompt.partition("\n\n")
        if question != SUBQUERY:
            return "I don't know."
        return str(_sum_counts(_COUNT.findall(text)))


# --- paper-style kinds (sniah, oolong, pairs): code over the whole context -------------------
_RECORD = (
    r'r"^Date: ([0-9]{4}-[0-9]{2})-[0-9]{2} [|][|] User: ([0-9]+) [|][|] Instance: .*? [|][|] Label: (.+)$"'
)


class _SniahAgent:
    def __init__(self, key: str) -> None:
        self.key = key

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        peek = _peek(state)
        if peek is not None:
            return peek
        if state.failures["search"] >= 3:
            return None
        code = (
            f'm = re.search(r"special magic numbers? for {re.escape(self.key)} is: ([0-9]+)", context)\n'
            'print("NUMBER", m.group(1) if m else "NONE")\n'
            'answer = m.group(1) if m else "not found"'
        )
        return Move("search", code, final_var="answer")

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        found = last_marked(observation, "NUMBER")
        if found is not None and found.strip() != "NONE":
            state.facts["number"] = found.strip()

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("number", "not found")


class SniahPolicy(ScriptedPolicy):
    """sniah: one regular-expression search for the key's magic number."""

    kind = "sniah"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        self.key = _parse(r"magic number for (\S+) mentioned", query, self.kind).group(1)

    def root(self) -> Agent:
        return _SniahAgent(self.key)


class _OolongAgent:
    def __init__(self, month: str, label: str) -> None:
        self.month, self.label = month, label

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        avoid = state.avoid
        peek = _peek(state)
        if peek is not None:
            return peek
        if state.failures["count"] >= 3:
            return None
        unpack = "unpack" not in avoid
        loop = "for month, user, label in rows:\n" if unpack else "for row in rows:\n"
        month, label = ("month", "label") if unpack else ("row[0]", "row[2]")
        code = (
            f"rows = re.findall({_RECORD}, context, re.M)\n"
            "answer = 0\n"
            + loop
            + f'    if {month} == "{self.month}" and {label} == "{self.label}":\n'
            + f"        {_add(avoid, 'answer', '1')}\n"
            + 'print(len(rows), "rows;", answer)'
        )
        return Move("count", code, final_var="answer")

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        found = re.search(r"rows; (\d+)", observation)
        if found is not None:
            state.facts["count"] = found.group(1)

    def guess(self, state: PolicyState) -> str:
        return state.facts.get("count", "0")


class OolongPolicy(ScriptedPolicy):
    """oolong: every record parsed with one pattern, the month's records of the label counted."""

    kind = "oolong"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        found = _parse(r"dated in ([0-9]{4}-[0-9]{2}) have the label '([^']+)'", query, self.kind)
        self.month, self.label = found.group(1), found.group(2)

    def root(self) -> Agent:
        return _OolongAgent(self.month, self.label)


class _PairsAgent:
    def __init__(self, label: str) -> None:
        self.label = label

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        peek = _peek(state)
        if peek is not None:
            return peek
        if state.failures["pairs"] >= 3:
            return None
        code = (
            f"rows = re.findall({_RECORD}, context, re.M)\n"
            "users = []\n"
            "for row in rows:\n"
            f'    if row[2] == "{self.label}" and row[1] not in users:\n'
            "        users.append(row[1])\n"
            "users.sort()\n"
            "pairs = []\n"
            "for i in range(len(users)):\n"
            "    for j in range(i + 1, len(users)):\n"
            '        pairs.append("(" + users[i] + ", " + users[j] + ")")\n'
            'answer = "\\n".join(pairs)\n'
            'print(len(users), "users;", len(pairs), "pairs")'
        )
        return Move("pairs", code, final_var="answer")

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        pass

    def guess(self, state: PolicyState) -> str:
        return "no pairs found"


class PairsPolicy(ScriptedPolicy):
    """pairs: the users having the label, then every pair of them, one per line."""

    kind = "pairs"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        super().__init__(query, max_errors=max_errors, variant=variant)
        self.label = _parse(r"with the label '([^']+)'", query, self.kind).group(1)

    def root(self) -> Agent:
        return _PairsAgent(self.label)


# --- factory ----------------------------------------------------------------------------------

POLICIES: dict[str, type[ScriptedPolicy]] = {
    "needle": NeedlePolicy,
    "aggregate": AggregatePolicy,
    "multihop": MultihopPolicy,
    "combine": CombinePolicy,
    "sniah": SniahPolicy,
    "oolong": OolongPolicy,
    "pairs": PairsPolicy,
    "followup": FollowupPolicy,
    "lookup": LookupPolicy,
}
"""The scripted policy of each task kind."""

SCRIPTED_MODEL = "scripted"
"""The model name that means "the task's scripted policy" in a grid (any other goes to litellm)."""


def policy_for(task: TaskInstance, *, variant: int = 0, max_errors: int | None = None) -> ScriptedPolicy:
    """The deterministic policy for ``task`` (an LLMClient: pass it as ``RLM(..., client=...)``).

    It reads only the task's questions. Stateless, so one policy may serve any number of runs at once.
    ``variant`` (e.g. a grid's run index) selects the writing :class:`~.scripted_policy.Style`: variant 0
    is the typical transcript, others draw habits and patience from a seeded stream.
    ``max_errors`` overrides the style's patience.
    """
    policy = POLICIES.get(task.kind)
    if policy is None:
        raise ToolUsageError(f"no scripted policy for task kind {task.kind!r}; known: {sorted(POLICIES)}")
    return policy.for_task(task, max_errors=max_errors, variant=variant)


def client_for(
    task: TaskInstance, model: str, *, variant: int = 0, max_errors: int | None = None
) -> LLMClient | None:
    """The client a grid cell uses: the task's policy for model ``"scripted"``, else None (the RLM's
    default litellm client, which reaches any provider or OpenAI-compatible server by model name,
    ``api_base`` and ``api_key``)."""
    return policy_for(task, variant=variant, max_errors=max_errors) if model == SCRIPTED_MODEL else None
