"""A small needle suite and its scripted policy: the compare grid's test fixture.

It implements the research Suite protocol the way a study's own suite would (``--suite
compare_suite:needle_suite``), so the grid, its executors and outputs are tested without the
built-in suites. The policy writes what models write (``import re`` although ``re`` is injected)
and retries without the import when the observation is an error, so ``upstream`` (imports
refused) takes one iteration more than ``fixed`` for the same answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
from typing import Any

from rlm_compat.clients import ScriptedClient
from rlm_compat.tools.research.base import Grade, RunSpec, TaskInstance

WORDS = ("alpha", "bravo", "delta", "echo", "golf", "hotel", "kilo", "lima", "oscar", "tango")


@dataclasses.dataclass(frozen=True)
class ExactGrader:
    """Passes exactly the expected code, surrounding whitespace aside."""

    expected: str
    name: str = "needle-exact"
    version: str = "1"

    def grade(self, answer: str | None) -> Grade:
        if answer is None:
            return Grade(False, "no answer", self.name, self.version)
        ok = answer.strip() == self.expected
        return Grade(ok, "exact match" if ok else f"expected {self.expected!r}", self.name, self.version)


@dataclasses.dataclass(frozen=True)
class NeedleTask:
    size: int
    seed: int
    kind: str = "needle"

    @property
    def task_id(self) -> str:
        return f"needle-{self.size}-s{self.seed}"

    @property
    def code(self) -> str:
        return f"K{random.Random(f'code-{self.seed}-{self.size}').randrange(10**6, 10**7)}"

    @property
    def grader(self) -> ExactGrader:
        return ExactGrader(self.code)

    def build(self) -> TaskInstance:
        rng = random.Random(f"corpus-{self.seed}-{self.size}")
        words: list[str] = []
        length = 0
        while length < self.size:
            word = rng.choice(WORDS)
            words.append(word)
            length += len(word) + 1
        needle = f"The access code is {self.code}."
        words.insert(rng.randrange(len(words)), needle)
        context = " ".join(words)
        return TaskInstance(
            task_id=self.task_id,
            kind=self.kind,
            size=self.size,
            seed=self.seed,
            query="What is the access code? Answer with the code only.",
            context=context,
            corpus_sha256=hashlib.sha256(context.encode("utf-8")).hexdigest(),
        )


@dataclasses.dataclass(frozen=True)
class NeedleSuite:
    sizes: tuple[int, ...] = (2_000, 10_000)
    seeds: tuple[int, ...] = (0, 1)
    name: str = "needle-test"
    version: str = "1"

    def tasks(self) -> list[NeedleTask]:
        return [NeedleTask(size, seed) for size in self.sizes for seed in self.seeds]


def needle_suite() -> NeedleSuite:
    return NeedleSuite()


FIRST = "```python\nimport re\nfound = re.search(r'access code is (\\w+)', context)\ncode = found.group(1)\nprint(code)\n```"
RETRY = (
    "```python\nfound = re.search(r'access code is (\\w+)', context)\ncode = found.group(1)\nprint(code)\n```"
)
ANSWER = "FINAL_VAR(code)"


def reply(model: str, messages: list[Any]) -> str:
    """The next reply from the conversation so far (so one policy serves any number of runs)."""
    answered = sum(m["role"] == "assistant" for m in messages)
    last = str(messages[-1]["content"])
    if answered == 0:
        return FIRST
    if re.search(r"\bK\d{7}\b", last):
        return ANSWER
    if answered >= 3:
        return 'FINAL("unknown")'
    return RETRY


def policy(task: TaskInstance, spec: RunSpec) -> ScriptedClient:
    return ScriptedClient(reply)


def server_reply(request: dict[str, Any]) -> str:
    """The same policy behind the loopback OpenAI-compatible server."""
    return reply(request.get("model", ""), request["messages"])


def needle_suite_100k() -> NeedleSuite:
    """Ten 100 k-character needle tasks (the grid benchmark's fixture)."""
    return NeedleSuite(sizes=(100_000,), seeds=tuple(range(10)))
