"""Re-execute a recorded run's code under any profile and say where its observations diverge.

Why step by step, and not the whole loop with a replay client: under another profile the
observations differ, so the next request's messages differ from the recorded ones, and a client
keyed by messages has no reply for it — the replay would stop at the first divergence and say
nothing about the rest. Rerunning the loop also re-decides when a node ends (FINAL checks, the
parser), so a different profile could end a node early or late and shift every later reply.
Replaying the *code* instead keeps the model's side fixed: each RLM node gets a fresh REPL
session with its query and context, and its recorded steps run there in order, whatever the new
observations are. The model-calling functions the code uses are served the recorded answers of
that step, in order (``llm_query`` the recorded replies; ``recursive_llm`` / ``rlm_query`` the
child RLM's recorded answer). Each child RLM is replayed in its own session right after the parent
step that started it, with the context the *replayed* code passed, so a child whose context
changed shows its own divergences. Every step runs even after a divergence, which is what
``--all`` and the quirk table need.

Limits, by design: the loop's own decisions (FINAL parsing, ``final_before_exec``) are not
replayed, only the steps the recording executed; a child the replayed code never starts is
reported as not reached; the recorded context is not in a trajectory (only its size) and must be
passed in.
"""

from __future__ import annotations

import builtins
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ... import errors, plain_json
from ...compat import ApiSemantics, resolve_api, select_release
from ...config import ReplConfig
from ...errors import LLMCallError, TrajectoryError
from ...profiles import Profile, resolve_profile
from ...repl import REPLExecutor
from ...repl_namespace import (  # the loop's namespace and argument checks: replay's code sees the same
    DEPTH_TEXT,
    build_namespace,
    check_text,
    observe,
    query_pairs,
    texts,
)
from ...sandbox import host_call
from ..runs.steps import RecordedNode, RecordedRun, RecordedStep, RecordedSubcall, RecordedToolCall

__all__ = ["ReplayReport", "StepOutcome", "replay", "replay_profile"]


@dataclass(frozen=True)
class StepOutcome:
    """One recorded step and what it gave when run again."""

    step: RecordedStep
    observation: str | None
    """The new observation; None when the step was not reached (see ``note``)."""
    error: bool
    """Whether the new run of the step failed (a REPLError or another exception)."""
    note: str = ""

    @property
    def reached(self) -> bool:
        """Whether the step ran at all."""
        return self.observation is not None

    @property
    def diverged(self) -> bool:
        """Not reached, or its observation differs from the recorded one.

        Trailing whitespace is ignored (foreign REPLs end printed output with a newline, ours
        strips it); a step whose format keeps no observation only diverges by not running.
        """
        if self.observation is None:
            return True
        recorded = self.step.observation
        return recorded is not None and recorded.rstrip() != self.observation.rstrip()


@dataclass(frozen=True)
class ReplayReport:
    """All outcomes of one replay, in recorded order."""

    run: RecordedRun
    profile: str
    isolation: str
    outcomes: tuple[StepOutcome, ...]

    @property
    def divergences(self) -> tuple[StepOutcome, ...]:
        """The outcomes that diverged, in recorded order."""
        return tuple(o for o in self.outcomes if o.diverged)

    @property
    def identical(self) -> bool:
        """Every step reached, with the recorded observation."""
        return not self.divergences

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the run, the profile, and every step's recorded and new observation."""
        run = self.run
        return {
            "trajectory": run.path,
            "format": run.format,
            "format_version": run.format_version,
            "profile": self.profile,
            "isolation": self.isolation,
            "identical": self.identical,
            "divergences": len(self.divergences),
            "steps": [
                {
                    "node": o.step.node,
                    "step": o.step.number,
                    "where": o.step.where,
                    "code": o.step.code,
                    "recorded_observation": o.step.observation,
                    "recorded_error": o.step.error,
                    "observation": o.observation,
                    "error": o.error,
                    "reached": o.reached,
                    "diverged": o.diverged,
                    "note": o.note,
                }
                for o in self.outcomes
            ],
        }

    def render(self, *, every: bool = False) -> str:
        """The report as text: a summary line, then the first divergence (or all of them)."""
        run = self.run
        head = (
            f"replay of {run.path} ({run.format_version}; {len(run.nodes)} RLM node(s), "
            f"{len(self.outcomes)} step(s)) under profile {self.profile}, isolation {self.isolation}"
        )
        divergences = self.divergences
        if not divergences:
            return f"{head}\nidentical: every step gave its recorded observation"
        lines = [head, f"{len(divergences)} of {len(self.outcomes)} step(s) diverge"]
        for outcome in divergences if every else divergences[:1]:
            lines.append("")
            lines.extend(_describe(outcome, run, first=not every))
        return "\n".join(lines)


def _describe(outcome: StepOutcome, run: RecordedRun, *, first: bool) -> list[str]:
    step = outcome.step
    title = "first divergence" if first else "divergence"
    lines = [f"{title}: node {step.node} step {step.number} ({run.path}, {step.where})", "code:"]
    lines.append(_indent(step.code))
    recorded = "(not recorded)" if step.observation is None else step.observation
    flag = "" if step.error is None else (" [error]" if step.error else "")
    lines += [f"recorded observation{flag}:", _indent(recorded)]
    if outcome.observation is None:
        lines += ["new observation:", _indent(f"(not reached: {outcome.note})")]
    else:
        lines += [f"new observation{' [error]' if outcome.error else ''}:", _indent(outcome.observation)]
    return lines


def _indent(text: str) -> str:
    return textwrap.indent(text or "(empty)", "    ")


def replay_profile(run: RecordedRun, profile: str | Profile | None) -> Profile:
    """The profile asked for, else the one the recording ran under, else ``fixed``."""
    if profile is not None:
        return resolve_profile(profile)
    if run.profile is None:
        return Profile.fixed()
    try:
        return Profile.named(run.profile)
    except ValueError:
        raise TrajectoryError(
            f"{run.path}: recorded under profile {run.profile!r}, which is not a preset or spec "
            "this rlm_compat can rebuild; name the profile to replay under (--profile)"
        ) from None


def replay(
    run: RecordedRun,
    *,
    profile: str | Profile | None = None,
    isolation: str | None = None,
    context: str | None = None,
    timeout: float | None = None,
    same_context: bool = True,
    api: str | ApiSemantics | None = None,
) -> ReplayReport:
    """Re-execute every recorded step of ``run`` under ``profile`` (default: the recording's).

    The report lists the steps in the order the replay ran them: a node's steps, each followed by
    the child RLMs it started (a step never reached where it would have run).

    ``context``: the root's context (a trajectory keeps only its size). None is allowed only when
    the recording had an empty context or does not say (foreign formats); then it is ``""``.
    ``isolation``: ``inline`` or ``process`` (default: the recording's when replaying under its
    profile, else the profile's). ``timeout``: seconds per
    step (default: the recording's, else 5). ``same_context=False`` accepts a context of another
    size than the recorded one (an unknown context replaced by ``""``, as the quirk table does).
    ``api``: the API preset whose REPL namespace the code gets (default: the recording's, else
    ``$RLM_COMPAT_API`` or 2fb46cc's, as an RLM's).
    """
    chosen = replay_profile(run, profile)
    if isolation is None and chosen.name == run.profile:
        isolation = run.isolation
    root = run.root
    if context is None and run.context is not None:
        context = run.context
    if context is None:
        if root.context_chars and same_context:
            raise TrajectoryError(
                f"{run.path}: the trajectory keeps only the context's size ({root.context_chars} "
                "characters), not its text: pass the context the run was given (--context-file)"
            )
        context = ""
    elif same_context and root.context_chars is not None and root.context_chars != len(context):
        raise TrajectoryError(
            f"{run.path}: the recorded context had {root.context_chars} characters, the one given has "
            f"{len(context)}: pass the context this run was given"
        )
    config = ReplConfig(
        profile=chosen,
        timeout=timeout if timeout is not None else (run.repl_timeout or ReplConfig.timeout),
        isolation=isolation,
        max_output_chars=run.max_output_chars or ReplConfig.max_output_chars,
    )
    replayer = _Replayer(run, config, resolve_api(api if api is not None else run.api))
    replayer.node(root, context)
    for other in run.nodes[1:]:  # further runs of one file (an app log's trials): fresh sessions
        if not other.parent_id and other.node_id not in replayer._started:
            replayer._started.add(other.node_id)
            replayer.node(other, context)
    return ReplayReport(run, chosen.name, str(config.isolation), tuple(replayer.ordered(chosen.name)))


class _Replayer:
    """Replays nodes one after another, children right after the parent step that started them."""

    def __init__(self, run: RecordedRun, config: ReplConfig, api: ApiSemantics) -> None:
        self.run, self.config, self.api = run, config, api
        self.nodes = {n.node_id: n for n in run.nodes}
        self.outcomes: dict[int, StepOutcome] = {}
        self._started: set[str] = {run.root.node_id}

    def node(self, node: RecordedNode, context: Any) -> None:
        served = _Served(self.run, node, self.api)
        env = self._env(node, context, served)
        with REPLExecutor(config=self.config, api=self.api) as repl:
            for step in node.steps:
                served.start(step)
                observation, failed = observe(repl, step.code, env)
                self.outcomes[id(step)] = StepOutcome(step, observation, failed)
                for child_id, child_context in served.children:
                    child = self.nodes.get(child_id)
                    if child is not None and child_id not in self._started:
                        self._started.add(child_id)
                        self.node(child, child_context)

    def ordered(self, profile: str) -> list[StepOutcome]:
        """Every step's outcome in causal order: a node's steps, each followed by the children it
        started (what the replay ran in that order; steps never reached where they would have run)."""
        result: list[StepOutcome] = []

        def visit(node: RecordedNode) -> None:
            for step in node.steps:
                outcome = self.outcomes.get(id(step))
                if outcome is None:
                    note = f"{node.parent_id} did not start {node.node_id} under profile {profile}"
                    outcome = StepOutcome(step, None, False, note)
                result.append(outcome)
                for sub in step.subcalls:
                    child = self.nodes.get(sub.child)
                    if sub.kind == "child" and child is not None:
                        visit(child)

        visit(self.run.root)
        for other in self.run.nodes[1:]:
            if not other.parent_id:
                visit(other)
        seen = {id(o.step) for o in result}  # a child started by a step the recording never finished
        for step in self.run.steps:
            if id(step) not in seen:
                note = f"{step.node} was started by a step the recording does not hold"
                result.append(self.outcomes.get(id(step)) or StepOutcome(step, None, False, note))
        return result

    def _env(self, node: RecordedNode, context: Any, served: _Served) -> dict[str, Any]:
        """The namespace the RLM loop gives a node (its own builder), sub-calls served from the
        recording; plus the names a foreign recording's code expects."""
        env = build_namespace(
            node.query,
            context,
            served,
            release=select_release(self.api),
            profile=self.config.profile,
            max_depth=self.run.max_depth,
        ).env
        if "context_0" in self.run.extra_names:
            env["context_0"] = context
        if "completion_context" in self.run.extra_names:
            env["completion_context"] = context
        if "SUBMIT" in self.run.extra_names:
            env["SUBMIT"] = host_call(_submit)
        for name, kind, value in self.run.custom_tools:
            if kind == "function":
                env[name] = host_call(served.tool(name))
            elif value is not None:
                env[name] = plain_json.loads(value)
        for name in self.run.tools:
            env.setdefault(name, host_call(_unrecorded_tool(name)))
        for name, value in node.inputs.items():
            env.setdefault(name, value)
        return env


def _submit(*args: Any, **kwargs: Any) -> None:
    """dspy.RLM's SUBMIT(...): ends the recorded run; replay only needs the call to succeed."""


def _unrecorded_tool(name: str) -> Any:
    """A stand-in for an application's tool whose results the log does not hold."""

    def tool(*args: Any, **kwargs: Any) -> Any:
        raise LLMCallError(f"replay: the recording does not hold what the tool {name}(...) returned")

    tool.__name__ = name
    return tool


class _Served:
    """The recorded answers of one node's current step, handed out as its code asks for them
    (a :class:`~rlm_compat._loop.SubCallProvider`)."""

    def __init__(self, run: RecordedRun, node: RecordedNode, api: ApiSemantics) -> None:
        self.run, self.node, self.api = run, node, api
        self.queue: list[RecordedSubcall] = []
        self.step: RecordedStep | None = None
        self.children: list[tuple[str, Any]] = []
        self.tool_queue: list[RecordedToolCall] = []

    def start(self, step: RecordedStep) -> None:
        self.step, self.queue, self.children = step, list(step.subcalls), []
        self.tool_queue = list(step.tool_calls)

    def tool(self, name: str) -> Callable[..., Any]:
        """A custom tool function answering each call from the step's recorded calls of ``name``."""

        def call(*args: Any, **kwargs: Any) -> Any:
            for i, item in enumerate(self.tool_queue):
                if item.function == name:
                    del self.tool_queue[i]
                    if item.result is None:
                        raise replayed_failure(item.error)
                    return plain_json.loads(item.result)
            step = self.step
            where = f"node {self.node.node_id} step {step.number if step else '?'}"
            raise LLMCallError(
                f"replay: the recording has no further result of the tool {name}() in {where} "
                "(the replayed code made a call the recorded run did not)"
            )

        call.__name__ = name
        return call

    def _take(self, kinds: Iterable[str], what: str) -> RecordedSubcall:
        wanted = {*kinds, "any"}
        for i, item in enumerate(self.queue):
            if item.kind in wanted:
                return self.queue.pop(i)
        step = self.step
        where = f"node {self.node.node_id} step {step.number if step else '?'}"
        raise LLMCallError(
            f"replay: the recording has no further answer for {what} in {where} "
            "(the replayed code made a call the recorded run did not)"
        )

    def _answer(self, item: RecordedSubcall) -> str:
        if item.reply is None:
            raise replayed_failure(item.error)
        return item.reply

    def _batch_item(self, item: RecordedSubcall) -> str:
        return item.reply if item.reply is not None else f"Error: {item.error}"

    def _child(self, item: RecordedSubcall, context: Any) -> None:
        if item.child:
            self.children.append((item.child, context))

    def _child_kinds(self) -> tuple[str, ...]:
        """What ``rlm_query`` made in the recording: a child RLM, or a plain call at the depth limit."""
        limit = self.run.max_depth
        if limit is None:
            return ("child", "leaf")
        return ("leaf",) if self.node.depth + 1 >= limit else ("child",)

    def recursive_llm(self, sub_query: str, sub_context: str) -> str:
        """2fb46cc's child RLM: its recorded answer (upstream's text at the depth limit)."""
        limit = self.run.max_depth
        if limit is not None and self.node.depth + 1 >= limit:
            return DEPTH_TEXT.format(limit=limit)
        item = self._take(("child",), "recursive_llm")
        self._child(item, sub_context)
        return self._answer(item)

    # The checks below are the loop's own (same texts), so a call it refused before asking the
    # model is refused again here instead of consuming a recorded answer.

    def llm_query(self, prompt: str, model: str | None = None) -> str:
        """One plain model call: the recorded reply."""
        check_text("llm_query(prompt)", prompt)
        return self._answer(self._take(("leaf",), "llm_query"))

    def llm_query_with_context(self, query: str, context: str = "", model: str | None = None) -> str:
        """0.5.0's ``llm_query(query, context)``: the recorded reply."""
        check_text("llm_query(query)", query)
        check_text("llm_query(context)", context)
        return self._answer(self._take(("leaf",), "llm_query"))

    def llm_query_batched(self, prompts: Iterable[Any], model: str | None = None) -> list[str]:
        """Plain model calls: the recorded replies, in order."""
        items = texts("llm_query_batched(prompts)", prompts)
        return [self._batch_item(self._take(("leaf",), "llm_query_batched")) for _ in items]

    def rlm_query(self, query: str, context: str = "") -> str:
        """A child RLM (a plain call at the depth limit): its recorded answer."""
        check_text("rlm_query(query)", query)
        check_text("rlm_query(context)", context)
        item = self._take(self._child_kinds(), "rlm_query")
        self._child(item, query if self.run.child_context == "query" else context)
        return self._answer(item)

    def rlm_query_batched(self, queries: Iterable[Any], contexts: Iterable[Any] | None = None) -> list[str]:
        """Child RLMs: their recorded answers, in order."""
        items, texts = query_pairs(queries, contexts)
        answers = []
        for query, context in zip(items, texts, strict=True):
            item = self._take(self._child_kinds(), "rlm_query_batched")
            self._child(item, query if self.run.child_context == "query" else context)
            answers.append(self._batch_item(item))
        return answers


def replayed_failure(error: str) -> Exception:
    """The recorded ``"<Type>: <message>"`` failure of a call as an exception the code sees alike.

    Sandboxed code sees a builtin or rlm_compat exception as itself and any other class as
    ``RuntimeError("<Type>: <message>")`` (:func:`rlm_compat.sandbox.step.hostcall.sanitized`): the
    same class is rebuilt for the first two, a stand-in class of the recorded name for the rest,
    so the replayed step prints what the recorded one did.
    """
    name, _, message = error.partition(": ")
    known = getattr(builtins, name, None) or getattr(errors, name, None)
    if isinstance(known, type) and issubclass(known, Exception):
        try:
            return known(message)
        except Exception:
            pass  # a constructor that needs more than a message (BudgetExceededError)
    if not name.isidentifier():
        return LLMCallError(error)
    stand_in: type[Exception] = type(name, (Exception,), {"__module__": "rlm_compat.replayed"})
    return stand_in(message)
