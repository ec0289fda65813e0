"""Scripted policies solving the generated tasks through the real RLM loop and REPL.

Outcomes are whatever the loop produces: the tests assert relations (fixed solves it; upstream
costs iterations or the answer; an import refusal costs exactly one retry), never a recorded
result.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest
from examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from rlm_compat import RLM, REPLExecutor
from rlm_compat.events import SubcallStarted
from rlm_compat.prompts import PROMPT_VERSIONS
from rlm_compat.record import CompletionResult, RunResult
from rlm_compat.testing import ScriptedChatServer
from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.research.base import Grade
from rlm_compat.tools.research.scripted_policy import ScriptedPolicy, Style, diagnose, read_conversation
from rlm_compat.tools.research.task_policies import SUBQUERY, CombinePolicy, client_for, policy_for
from rlm_compat.tools.research.tasks import KINDS, MIN_SIZE, GeneratedTask

KIND_NAMES = sorted(KINDS)


def solve(
    spec: GeneratedTask, profile: str, isolation: str = "inline", **kwargs: Any
) -> tuple[RunResult, Grade, RLM]:
    instance = spec.build()
    rlm = RLM("scripted", client=policy_for(instance, **kwargs), profile=profile, isolation=isolation)
    result = rlm.try_complete_result(instance.query, instance.context)
    answer = result.answer if isinstance(result, CompletionResult) else None
    return result, spec.grader.grade(answer), rlm


@pytest.mark.parametrize("isolation", ["inline", "process"])
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_policy_solves_its_task_under_fixed(kind: str, isolation: str) -> None:
    _, grade, rlm = solve(GeneratedTask(kind, 10_000, 0), "fixed", isolation)
    assert grade.passed, (grade.reason, rlm.messages[-2:])
    assert rlm.stats["iterations"] == 2  # a peek, then the code that ends with FINAL_VAR


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_policy_solves_larger_contexts_under_fixed(kind: str) -> None:
    _, grade, _ = solve(GeneratedTask(kind, 100_000, 1), "fixed")
    assert grade.passed, grade.reason


@settings(max_examples=examples(20), deadline=None)
@given(
    kind=st.sampled_from(KIND_NAMES),
    size=st.integers(min_value=MIN_SIZE, max_value=60_000),
    seed=st.integers(min_value=0, max_value=10**9),
    variant=st.integers(min_value=0, max_value=10**6),
    prompt=st.sampled_from(sorted(PROMPT_VERSIONS)),
)
def test_any_task_any_variant_is_solved_under_fixed(
    kind: str, size: int, seed: int, variant: int, prompt: str
) -> None:
    spec = GeneratedTask(kind, size, seed)
    instance = spec.build()
    client = policy_for(instance, variant=variant)
    rlm = RLM("scripted", client=client, profile="fixed", isolation="inline", prompt_version=prompt)
    result = rlm.try_complete_result(instance.query, instance.context)
    answer = result.answer if isinstance(result, CompletionResult) else None
    assert spec.grader.grade(answer).passed, rlm.messages[-2:]


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_every_style_variant_solves_its_task_under_fixed(kind: str) -> None:
    spec = GeneratedTask(kind, 10_000, 2)
    styles = {Style.variant(v) for v in range(12)}
    assert len(styles) > 6  # the variants really write differently
    for variant in range(12):
        _, grade, rlm = solve(spec, "fixed", variant=variant)
        assert grade.passed, (variant, grade.reason, rlm.messages[-2:])


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_upstream_quirks_cost_iterations_or_the_answer(kind: str) -> None:
    spec = GeneratedTask(kind, 10_000, 0)
    _, fixed, fixed_rlm = solve(spec, "fixed")
    _, upstream, rlm = solve(spec, "upstream")
    assert fixed.passed
    assert not upstream.passed or rlm.stats["iterations"] > fixed_rlm.stats["iterations"]
    # the policy saw an error and its next reply was a different one: it retried another way
    turns = read_conversation(rlm.messages).turns
    retried = [
        (reply, turns[i + 1][0])
        for i, (reply, observation) in enumerate(turns[:-1])
        if diagnose(observation) is not None
    ]
    assert retried and all(before != after for before, after in retried)


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_refused_import_costs_exactly_one_retry(kind: str) -> None:
    spec = GeneratedTask(kind, 10_000, 0)
    _, _, fixed_rlm = solve(spec, "fixed")
    _, grade, rlm = solve(spec, "fixed-with:imports_refused")
    assert grade.passed
    assert rlm.stats["iterations"] == fixed_rlm.stats["iterations"] + 1
    assert not any("import re" in m["content"] for m in rlm.messages[4:] if m["role"] == "assistant")


def test_giving_up_answers_with_what_it_has() -> None:
    result, grade, rlm = solve(GeneratedTask("needle", 10_000, 0), "upstream", max_errors=1)
    assert isinstance(result, CompletionResult)  # it ended with FINAL, not by running out of iterations
    assert not grade.passed
    assert (
        policy_for(GeneratedTask("needle", 10_000, 0).build(), max_errors=1)
        .reply(rlm.messages)
        .startswith('FINAL("')
    )


def _subcall_functions(result: RunResult) -> set[str]:
    return {e.function for e in result.trajectory if isinstance(e, SubcallStarted)}


def test_combine_delegates_chunks_to_sub_calls() -> None:
    spec = GeneratedTask("combine", 10_000, 0)
    fixed, grade, _ = solve(spec, "fixed")
    assert grade.passed and _subcall_functions(fixed) == {"llm_query_batched"}
    big, grade, _ = solve(GeneratedTask("combine", 1_000_000, 0), "fixed")
    assert grade.passed and _subcall_functions(big) == {"rlm_query_batched"}  # long chunks: child RLMs
    # without llm_query_batched (upstream's minimal namespace) it loops over recursive_llm instead
    recursive, grade, _ = solve(spec, "fixed-with:minimal_env")
    assert grade.passed and _subcall_functions(recursive) == {"recursive_llm"}


def test_combine_answers_its_own_sub_calls() -> None:
    from rlm_compat.tools.research.corpus import number_words

    policy = CombinePolicy("q")
    text = "\n".join(
        [
            f"Incident report IR-0001: the north gate sensor counted {number_words(42)} visitors before noon.",
            f"Maintenance note MN-0001: desk {number_words(9)} at the east wing was repainted.",
            f"Incident report IR-0002: staff at the museum hall logged {number_words(17)} visitors during the late shift.",
        ]
    )
    assert policy.leaf(f"{SUBQUERY}\n\n{text}") == "59"
    assert policy.leaf("What is the capital of France?") == "I don't know."
    child = [
        {"role": "system", "content": "You are a Recursive Language Model. Size: 10 characters. Depth: 1"}
    ]
    assert "re.findall" in policy.reply([*child, {"role": "user", "content": SUBQUERY}])
    assert policy.reply([*child, {"role": "user", "content": "Something else?"}]).startswith('FINAL("')


def test_policies_are_stateless_and_deterministic() -> None:
    instance = GeneratedTask("multihop", 10_000, 0).build()
    policy = policy_for(instance)

    async def both() -> list[RunResult]:
        runs = [RLM("scripted", client=policy, profile="upstream", isolation="inline") for _ in range(2)]
        return list(
            await asyncio.gather(*(r.atry_complete_result(instance.query, instance.context) for r in runs))
        )

    first, second = asyncio.run(both())
    assert isinstance(first, CompletionResult) and isinstance(second, CompletionResult)
    assert first.answer == second.answer
    assert [e.reply for e in first.trajectory if hasattr(e, "reply")] == [
        e.reply for e in second.trajectory if hasattr(e, "reply")
    ]


def _error_text(profile: str, code: str) -> str:
    env: dict[str, Any] = {"context": "abc", "query": "q"}
    try:
        REPLExecutor(profile=profile, isolation="inline").execute(code, env)
    except Exception as exc:  # the loop shows the model "Error: <message>"
        return f"Error: {exc}"
    return "no error"


@pytest.mark.parametrize(
    ("profile", "code", "flag"),
    [
        ("upstream", "import re", "import"),
        ("upstream", "x = 0\nx += 1", "inplace"),
        ("upstream", "d = {}\nd['k'] = 1", "item_write"),
        ("upstream", "a, b = 1, 2", "unpack"),
        # comprehensions are inlined from Python 3.12 (PEP 709): upstream's scoping bug is gone there
        (
            "upstream",
            "n = 2\nxs = [context[i:i+n] for i in range(2)]",
            "scope" if sys.version_info < (3, 12) else None,
        ),
        ("upstream", "def f():\n    return context\nf()", "scope"),
        ("upstream", "FINAL_VAR(x)", "final_call"),
        ("upstream", "llm_query_batched(['a'])", "batched"),
        ("fixed", "print(undefined_name)", "scope"),
    ],
)
def test_errors_are_diagnosed_from_the_real_observation(profile: str, code: str, flag: str | None) -> None:
    observation = _error_text(profile, code)
    assert diagnose(observation) == (None if flag is None else frozenset({flag})), observation


def test_final_var_given_a_value_is_diagnosed_as_a_directive_to_send_as_text() -> None:
    from rlm_compat.clients import ScriptedClient

    rlm = RLM(
        "m",
        client=ScriptedClient(["answer = 'x'\nFINAL_VAR(answer)", "FINAL_VAR(answer)"]),
        profile="upstream-without:minimal_env",
    )
    assert rlm.complete("q", "context") == "x"
    observation = rlm.messages[3]["content"]
    assert diagnose(observation) == frozenset({"final_call"}), observation


def test_a_normal_observation_is_not_an_error() -> None:
    assert diagnose("3\nError count: 0") is None
    assert diagnose("Error: Execution error: division by zero") == frozenset()


def test_the_same_task_runs_against_an_openai_compatible_server() -> None:
    """The model-agnostic path: RLM -> litellm -> HTTP, here a loopback server answering with the
    policy (a real model or local server is the same call with another model name and api_base)."""
    spec = GeneratedTask("aggregate", 10_000, 0)
    instance = spec.build()
    assert client_for(instance, "openai/some-model") is None  # the RLM's litellm client
    policy = client_for(instance, "scripted")
    assert isinstance(policy, ScriptedPolicy)
    answer: Callable[[dict[str, Any]], str] = lambda request: policy.reply(request["messages"])  # noqa: E731
    with ScriptedChatServer(answer) as server:
        rlm = RLM("openai/scripted", api_base=server.base_url, api_key="not-a-key", profile="fixed")
        result = rlm.complete_result(instance.query, instance.context)
    assert spec.grader.grade(result.answer).passed
    assert len(server.requests) == rlm.stats["iterations"] == 2


def test_policy_for_refuses_unknown_kinds_and_unreadable_queries() -> None:

    instance = GeneratedTask("needle", 10_000, 0).build()
    with pytest.raises(ToolUsageError, match="no scripted policy"):
        policy_for(type(instance)(**{**instance.__dict__, "kind": "poetry"}))
    with pytest.raises(ToolUsageError, match="cannot read its parameters"):
        policy_for(type(instance)(**{**instance.__dict__, "query": "Say hi."}))


def test_specs_instances_graders_and_policies_cross_process_boundaries() -> None:
    """A process pool or Ray worker receives these pickled: they must arrive equal and behave the same."""
    import pickle

    spec = GeneratedTask("combine", 10_000, 3)
    instance = spec.build()
    policy = policy_for(instance, variant=5)
    for value in (spec, instance, spec.grader):
        assert pickle.loads(pickle.dumps(value)) == value
    copy = pickle.loads(pickle.dumps(policy))
    messages = [
        {
            "role": "system",
            "content": "You are a Recursive Language Model. Size: 10,000 characters. Depth: 0",
        },
        {"role": "user", "content": instance.query},
    ]
    assert copy.reply(messages) == policy.reply(messages)
    assert copy.style == policy.style
