"""The machinery of scripted policies: reading a conversation, learning from errors, replying.

A scripted policy is a deterministic "model": an :class:`~rlm_compat.clients.LLMClient` whose reply
is a pure function of the messages it is sent. It keeps no state between calls, so one policy
serves concurrent runs, sub-calls and replays alike, and the same conversation always gets the
same reply.

What it writes is what real models write in RLM transcripts, and how it recovers is how they
recover. Each reply is one :class:`Move` of an :class:`Agent` (a plan for one task or sub-task).
The state a move is chosen from is rebuilt every call by folding the conversation so far:

* an observation that is an error is *diagnosed* from its text (``__import__ not found`` ->
  stop importing, ``_inplacevar_`` -> write ``x = x + 1``, a NameError of a top-level name ->
  stop relying on comprehension or function scope, ``FINAL_VAR`` undefined -> send the directive
  as text next turn...), and the flags it sets shape every later move;
* a step that failed for another reason is retried another way (the agent decides how);
* after ``max_errors`` error observations the policy gives up with ``FINAL`` of what it has.

So under profile ``upstream`` the quirks cost what they cost real models: extra iterations, extra
sub-calls, or the answer. Nothing here looks at the profile; only the observations do that.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from ...types import Message
from .base import TaskInstance
from .corpus import below, derive_rng

__all__ = [
    "Agent",
    "Conversation",
    "Dialect",
    "Move",
    "PolicyState",
    "ScriptedPolicy",
    "Style",
    "diagnose",
    "last_marked",
    "read_conversation",
    "read_dialect",
    "render",
]

_SIZE = re.compile(r"Size: ([0-9,]+) characters")
_SIZE_IN_QUERY = re.compile(r"of ([0-9,]+) total characters")
_DEPTH = re.compile(r"Depth: ([0-9]+)")
_UNDEFINED = re.compile(r"name '(\w+)' is not defined")
_ERROR_PREFIXES = ("Error:", "Unexpected error:")
_SIGNS = (
    ("__import__ not found", "import"),
    ("_inplacevar_", "inplace"),
    ("_write_", "item_write"),
    ("_unpack_sequence_", "unpack"),
    ("_apply_", "star_args"),
)
_FINAL_NAMES = frozenset({"FINAL", "FINAL_VAR"})
_QUERY_FUNCTIONS = frozenset({"llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched"})


@dataclasses.dataclass(frozen=True)
class Conversation:
    """What a call to the policy is about.

    ``leaf``: a plain model call (``llm_query``): no RLM system prompt, ``query`` is the whole
    prompt. Otherwise an RLM node: ``query`` is its first user message, ``size`` and ``depth`` come
    from its system prompt, and ``turns`` pairs each earlier reply with the observation after it.
    """

    leaf: bool
    query: str
    size: int = 0
    depth: int = 0
    turns: tuple[tuple[str, str], ...] = ()
    dialect: Dialect = dataclasses.field(default_factory=lambda: Dialect())


def read_conversation(messages: Sequence[Message] | Sequence[dict[str, Any]]) -> Conversation:
    """Classify a request the way a model would see it: an RLM node's transcript or a bare prompt."""
    if not messages:
        return Conversation(leaf=True, query="")
    first = messages[0]
    system = str(first.get("content") or "") if first.get("role") == "system" else ""
    if "SUBMIT(" in system and "[[ ## repl_history ## ]]" in system:
        return _read_dspy(system, messages)
    if "Recursive Language Model" not in system:
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        return Conversation(leaf=True, query=users[-1] if users else "")
    rest = list(messages[1:])
    query = str(rest[0].get("content") or "") if rest else ""
    # each reply with the message after it (its observation); other user messages (rlms' "Turn
    # k/N:" prompts) are not observations
    turns = tuple(
        (str(m.get("content") or ""), str(rest[i + 1].get("content") or ""))
        for i, m in enumerate(rest)
        if m.get("role") == "assistant" and i + 1 < len(rest) and rest[i + 1].get("role") != "assistant"
    )
    size = _SIZE.search(system) or _SIZE_IN_QUERY.search(query)
    depth = _DEPTH.search(system)
    return Conversation(
        leaf=False,
        query=query,
        size=int(size.group(1).replace(",", "")) if size else 0,
        depth=int(depth.group(1)) if depth else 0,
        turns=turns,
        dialect=read_dialect(system),
    )


_DSPY_VARIABLE = re.compile(
    r"Variable: `(\w+)`.*?Total length: ([0-9,]+) characters\n\s*Preview:\n\s*```\n(.*?)\n\s*```", re.S
)
_DSPY_STEP = re.compile(
    r"=== Step [0-9]+ ===\n.*?Code:\n```python\n(.*?)```\nOutput \([0-9,]+ chars\):\n(.*?)(?=\n=== Step |\Z)",
    re.S,
)


def _read_dspy(system: str, messages: Sequence[Message] | Sequence[dict[str, Any]]) -> Conversation:
    """dspy.RLM's layout: one user message holding the variables' previews and the REPL history
    (each step's code and output), answered in its adapter's fields, ended by ``SUBMIT``."""
    user = str(messages[-1].get("content") or "")
    head, _, rest = user.partition("[[ ## repl_history ## ]]")
    history = rest.partition("[[ ## iteration ## ]]")[0]
    variables = {m.group(1): (m.group(2), m.group(3)) for m in _DSPY_VARIABLE.finditer(head)}
    query = "\n".join(line.strip() for line in variables.get("query", ("0", ""))[1].splitlines())
    size = int(variables.get("context", ("0", ""))[0].replace(",", ""))
    turns = tuple(
        (
            code,
            "Error: " + out.strip()[len("[Error]") :].strip() if out.lstrip().startswith("[Error]") else out,
        )
        for code, out in _DSPY_STEP.findall(history)
    )
    dialect = Dialect(fence="python", standalone_final=True, submit=True)
    return Conversation(leaf=False, query=query, size=size, turns=turns, dialect=dialect)


def diagnose(observation: str) -> frozenset[str] | None:
    """None when ``observation`` is not an error; else what a model learns from it (maybe nothing).

    Flags: ``import`` (imports refused), ``inplace`` (``+=`` refused), ``item_write``
    (``d[k] = v`` refused), ``unpack`` (``a, b = ...`` refused), ``star_args``, ``final_call``
    (``FINAL`` / ``FINAL_VAR`` are not callable, or not with a bare name), ``batched`` (no
    ``llm_query*`` / ``rlm_query*``), ``scope`` (a top-level name was not visible: comprehension
    or function scoping).
    """
    if not observation.lstrip().startswith(_ERROR_PREFIXES):
        return None
    flags = {flag for sign, flag in _SIGNS if sign in observation}
    if "FINAL_VAR(" in observation and "no variable named" in observation:
        flags.add("final_call")  # the callable got the value, not a name: say it as text instead
    undefined = _UNDEFINED.search(observation)
    if undefined is not None and not flags:
        name = undefined.group(1)
        if name in _FINAL_NAMES:
            flags.add("final_call")
        elif name in _QUERY_FUNCTIONS:
            flags.add("batched")
        else:
            flags.add("scope")
    return frozenset(flags)


def last_marked(observation: str, marker: str) -> str | None:
    """The rest of the last output line starting with ``marker`` (the newest, when an upstream
    print collector repeats earlier output)."""
    found = None
    for line in observation.splitlines():
        if line.startswith(marker + " "):
            found = line[len(marker) + 1 :]
    return found


@dataclasses.dataclass(frozen=True)
class Move:
    """One reply: ``code`` run in a fence (``FINAL_VAR(final_var)`` appended when the policy
    believes it callable), or a plain ``text`` reply such as ``FINAL("...")``."""

    step: str
    code: str = ""
    final_var: str | None = None
    text: str | None = None


@dataclasses.dataclass
class PolicyState:
    """What the policy has learned so far in one conversation (rebuilt on every call)."""

    avoid: set[str] = dataclasses.field(default_factory=set)
    errors: int = 0
    failures: Counter[str] = dataclasses.field(default_factory=Counter)
    done: Counter[str] = dataclasses.field(default_factory=Counter)
    facts: dict[str, str] = dataclasses.field(default_factory=dict)
    pending_final: str | None = None


_HABITS = (
    ("import", 30),
    ("inplace", 25),
    ("final_call", 20),
    ("scope", 20),
    ("item_write", 20),
    ("batched", 15),
    ("unpack", 15),
    ("no_peek", 15),
)


@dataclasses.dataclass(frozen=True)
class Style:
    """How one simulated model writes before it has seen any error, so a grid's repeated runs
    are not all the same transcript (as samples of a real model are not).

    ``habits`` are :func:`diagnose` flags avoided from the start (a model that never imports,
    never uses ``+=``, sends ``FINAL_VAR`` alone, prefers explicit loops...; ``no_peek`` skips the
    first look at the context); ``patience`` is how many error observations it takes before
    giving up. Variant 0 is the typical transcript: every habit off, patience 4.
    """

    habits: frozenset[str] = frozenset()
    patience: int = 4

    @classmethod
    def variant(cls, number: int) -> Style:
        """The style of run ``number``: drawn from a seeded stream, the same on every machine."""
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"a policy variant is an integer >= 0, not {number!r}")
        if number == 0:
            return cls()
        rng = derive_rng("policy-style", number)
        habits = frozenset(flag for flag, percent in _HABITS if below(rng, 100) < percent)
        return cls(habits, patience=3 + below(rng, 4))


class Agent(Protocol):
    """A plan for one task (or sub-task) in one RLM node."""

    def decide(self, state: PolicyState, conversation: Conversation) -> Move | None:
        """The next move; None when the agent has nothing left to try."""

    def read(self, state: PolicyState, move: Move, observation: str) -> None:
        """Take what a successful move printed into ``state.facts``."""

    def guess(self, state: PolicyState) -> str:
        """The answer it gives up with: the best of what it has."""


@dataclasses.dataclass(frozen=True)
class Dialect:
    """How an implementation's system prompt says replies are written, as a model reads it.

    ``fence``: the code fence's tag (``python``; ``repl`` for rlms; empty for bare code, as
    recursive-llm 0.5.0 asks). ``standalone_final``: ``FINAL`` / ``FINAL_VAR`` only as a reply of
    their own, never inside code. ``answer_variable``: the run ends when code sets
    ``answer["content"]`` and ``answer["ready"] = True`` (rlms from 0.1.2) instead of ``FINAL``.
    ``avoid``: :func:`diagnose` flags the prompt itself rules out (``import`` when it says ``re``
    is there and imports are restricted). The default is 2fb46cc's prompt, the one rlm_compat uses.
    """

    fence: str = "python"
    standalone_final: bool = False
    answer_variable: bool = False
    avoid: frozenset[str] = frozenset()
    submit: bool = False
    """dspy.RLM: the run ends with ``SUBMIT(name)`` in code, and every reply is written in its
    adapter's fields (``[[ ## reasoning ## ]]``, ``[[ ## code ## ]]``, ``[[ ## completed ## ]]``)."""


_ANSWER_VARIABLE = re.compile(r"""answer\[["']ready["']\]|["']ready["']\s*:\s*True""")


def read_dialect(system: str) -> Dialect:
    """The :class:`Dialect` a system prompt asks for (what a model follows from reading it)."""
    if "```repl" in system:
        fence = "repl"
    elif re.search(r"(?i)do not wrap it in markdown fences", system):
        fence = ""
    else:
        fence = "python"
    avoid = set()
    if re.search(r"(?i)without writing `import re`|imports are (restricted|not allowed)", system):
        avoid.add("import")
    return Dialect(
        fence=fence,
        standalone_final=bool(re.search(r"(?i)standalone FINAL", system)),
        answer_variable=bool(_ANSWER_VARIABLE.search(system)),
        avoid=frozenset(avoid),
    )


def _dspy_fields(code: str) -> str:
    fields = (
        "[[ ## reasoning ## ]]\nNext step.",
        f"[[ ## code ## ]]\n```python\n{code}\n```",
        "[[ ## completed ## ]]",
    )
    return "\n\n".join(fields)


def _answer_code(value: str) -> str:
    return f'answer["content"] = {value}\nanswer["ready"] = True'


def render(move: Move, avoid: set[str], dialect: Dialect | None = None) -> str:
    """The reply text of a move, written as the policy currently believes works, in ``dialect``."""
    dialect = dialect or Dialect()
    if move.text is not None and dialect.submit:
        found = re.fullmatch(r'FINAL\("(.*)"\)|FINAL_VAR\((\w+)\)', move.text, re.S)
        if found is None:
            return move.text
        value = repr(found.group(1)) if found.group(1) is not None else found.group(2)
        return _dspy_fields(f"SUBMIT({value})")
    if move.text is not None:
        if not dialect.answer_variable:
            return move.text
        found = re.fullmatch(r'FINAL\("(.*)"\)|FINAL_VAR\((\w+)\)', move.text, re.S)
        if found is None:
            return move.text
        name = "result" if found.group(2) == "answer" else found.group(2)
        value = repr(found.group(1)) if found.group(1) is not None else f"str({name})"
        return _fence(_answer_code(value), dialect)
    code = move.code
    final_var = move.final_var
    if dialect.answer_variable:  # ``answer`` is the loop's dict there: compute into another name
        code = re.sub(r"\banswer\b", "result", code)
        final_var = "result" if final_var == "answer" else final_var
    if "import" not in avoid:  # as in most transcripts, although the prompt says re is there
        code = "import re\n" + code
    if final_var is not None and dialect.answer_variable:
        code += "\n" + _answer_code(f"str({final_var})")
    elif move.final_var is not None and "final_call" not in avoid:
        code += f"\nFINAL_VAR({move.final_var})"
    if dialect.submit:
        return _dspy_fields(code)
    return _fence(code, dialect)


def _fence(code: str, dialect: Dialect) -> str:
    return f"```{dialect.fence}\n{code}\n```" if dialect.fence else code


def _final_text(answer: str) -> str:
    cleaned = " ".join(answer.replace('"', "'").split()) or "unknown"
    return f'FINAL("{cleaned}")'


class ScriptedPolicy:
    """Base of the task policies: an LLM client whose replies come from :class:`Agent` plans.

    Subclasses give the agent for the root task (:meth:`root`), for a sub-task they delegated to a
    child RLM (:meth:`subtask`) and the reply to a plain ``llm_query`` prompt (:meth:`leaf`).
    ``variant`` picks the :class:`Style` (0: the typical one); ``max_errors``: error
    observations tolerated in one conversation before giving up (default: the style's patience).
    """

    kind = "scripted"

    def __init__(self, query: str, *, max_errors: int | None = None, variant: int = 0) -> None:
        self.style = Style.variant(variant)
        if max_errors is None:
            max_errors = self.style.patience
        if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 1:
            raise ValueError(f"max_errors must be an integer >= 1, not {max_errors!r}")
        self.query = query
        self.variant = variant
        self.max_errors = max_errors

    @classmethod
    def for_task(
        cls, task: TaskInstance, *, max_errors: int | None = None, variant: int = 0
    ) -> ScriptedPolicy:
        """The policy of ``task``: built from its question (a multi-question kind reads them all)."""
        return cls(task.query, max_errors=max_errors, variant=variant)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(query={self.query[:40]!r}..., variant={self.variant}, "
            f"max_errors={self.max_errors})"
        )

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str:
        """The LLMClient protocol: the reply to ``messages`` (``model`` and options are ignored)."""
        return self.reply(messages)

    def reply(self, messages: Sequence[Message] | Sequence[dict[str, Any]]) -> str:
        """The deterministic reply to a conversation."""
        conversation = read_conversation(messages)
        if conversation.leaf:
            return self.leaf(conversation.query)
        agent = self.agent_for(conversation.query)
        if agent is None:
            return _final_text("I cannot answer that question from this context.")
        dialect = conversation.dialect
        state = PolicyState(avoid=set(self.style.habits) | dialect.avoid)
        if dialect.standalone_final:
            state.avoid.add("final_call")
        for _, observation in conversation.turns:
            self._learn(agent, state, self._next(agent, state, conversation), observation)
        return render(self._next(agent, state, conversation), state.avoid, dialect)

    # --- for subclasses -----------------------------------------------------------------------

    def agent_for(self, query: str) -> Agent | None:
        """The plan for an RLM node whose first user message is ``query``: the task's own when
        the task's question is in it (rlms: "Answer the following: ..."), else a sub-task's."""
        if query == self.query or self.query in query:
            return self.root()
        return self.subtask(query)

    def root(self) -> Agent:
        """The plan for the task itself."""
        raise NotImplementedError

    def subtask(self, query: str) -> Agent | None:
        """The plan for a child RLM asked ``query`` (None: not a question this policy asks)."""
        return None

    def leaf(self, prompt: str) -> str:
        """The answer to a plain model call."""
        return "I don't know."

    # --- the fold -------------------------------------------------------------------------------

    def _next(self, agent: Agent, state: PolicyState, conversation: Conversation) -> Move:
        if state.pending_final is not None:
            return Move("final", text=f"FINAL_VAR({state.pending_final})")
        if state.errors >= self.max_errors:
            return Move("give_up", text=_final_text(agent.guess(state)))
        move = agent.decide(state, conversation)
        if move is None:
            return Move("give_up", text=_final_text(agent.guess(state)))
        return move

    @staticmethod
    def _learn(agent: Agent, state: PolicyState, move: Move, observation: str) -> None:
        flags = diagnose(observation)
        if move.text is not None:
            # a directive the loop did not take: don't send it again, count it as a failure
            state.pending_final = None
            state.errors += 1
            state.failures[move.step] += 1
            return
        if flags is None:
            state.done[move.step] += 1
            agent.read(state, move, observation)
            if move.final_var is not None:  # it should have ended the run: say it alone
                state.pending_final = move.final_var
            return
        state.errors += 1
        state.failures[move.step] += 1
        state.avoid |= flags
        if "final_call" in flags and move.final_var is not None:
            # FINAL_VAR is the block's last line: everything before it ran
            state.done[move.step] += 1
            state.pending_final = move.final_var
