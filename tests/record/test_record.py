"""The run record end to end: RLM -> litellm -> HTTP -> a scripted server on 127.0.0.1.

Events, tree stats, tokens and cost, per-run state under concurrency, budgets, retries, typed
provider errors, sub-calls and the trajectory file with its schema.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from locations import ROOT

from rlm_compat import (
    RLM,
    BudgetExceededError,
    CompletionResult,
    FailedCompletionResult,
    ProviderResponseError,
)
from rlm_compat.clients import ScriptedClient
from rlm_compat.events import EVENT_TYPES, TrajectoryEvent
from rlm_compat.record import RunBudget, json_schema, read_trajectory
from rlm_compat.record.trajectory import SCHEMA_PATH
from rlm_compat.testing import Disconnect, ErrorReply, RawReply, ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]

PRICED = "openai/gpt-4o-mini"  # in litellm's bundled price map: cost is known


def make(server: ScriptedChatServer, **kwargs: Any) -> RLM:
    kwargs.setdefault("api_key", "sk-loopback")
    kwargs.setdefault("isolation", "inline")
    return RLM(kwargs.pop("model", PRICED), api_base=server.base_url, **kwargs)


def user_text(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def is_root_iteration(request: dict[str, Any]) -> bool:
    return bool(request["messages"][0]["role"] == "system")


def words(request: dict[str, Any]) -> int:
    return sum(len(str(m["content"]).split()) for m in request["messages"])


def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# --- tree stats --------------------------------------------------------------------------------


def test_recursion_to_depth_three_sums_the_tree(chat_server: ServerFactory) -> None:
    import litellm

    def script(request: dict[str, Any]) -> str:
        query = user_text(request)
        level = int(query[1])
        return 'FINAL("bottom")' if level == 3 else f'FINAL(recursive_llm("q{level + 1} go", "ctx"))'

    server = chat_server(script)
    rlm = make(server, max_depth=4)
    result = rlm.complete_result("q0 go", "the context")
    assert result.answer == "bottom"
    stats = result.stats
    assert stats["llm_calls"] == 4
    assert (stats["root_calls"], stats["recursive_calls"], stats["leaf_calls"]) == (1, 3, 0)
    assert stats["max_depth_reached"] == 3
    assert stats["rlm_calls"] == 4
    assert stats["total_iterations"] == 4
    assert sorted(stats["by_depth"]) == ["0", "1", "2", "3"]
    assert all(b["calls"] == 1 for b in stats["by_depth"].values())

    prompt = sum(words(r) for r in server.requests)
    completion = sum(len(script(r).split()) for r in server.requests)
    assert stats["prompt_tokens"] == prompt
    assert stats["completion_tokens"] == completion
    assert stats["total_tokens"] == prompt + completion
    expected_cost = 0.0
    for request in server.requests:
        p, c = litellm.cost_per_token(
            model="gpt-4o-mini", prompt_tokens=words(request), completion_tokens=len(script(request).split())
        )
        expected_cost += p + c
    assert expected_cost > 0
    assert stats["estimated_cost_usd"] == pytest.approx(expected_cost, rel=1e-6)
    assert stats["by_model"][PRICED]["calls"] == 4
    assert stats["priced_calls"] == 4

    # the tree: each child RLM hangs under the RLM whose REPL started it
    starts = [e for e in result.trajectory if e.kind == "rlm_start"]
    assert [e.depth for e in starts] == [0, 1, 2, 3]
    assert [e.parent_id for e in starts] == ["", *[s.node_id for s in starts[:-1]]]
    # upstream's three keys are unchanged: the root's own figures
    assert rlm.stats == {"llm_calls": 1, "iterations": 1, "depth": 0}
    assert rlm.last_run is result


def test_leaf_calls_and_tokens_from_llm_query(chat_server: ServerFactory) -> None:
    def script(request: dict[str, Any]) -> str:
        if is_root_iteration(request):
            return 'a = llm_query("one two")\nb = llm_query_batched(["x", "y", "z"])\nFINAL(a + "".join(b))'
        return "leaf"

    server = chat_server(script)
    result = make(server).complete_result("q", "c")
    assert result.answer == "leafleafleafleaf"
    stats = result.stats
    assert (stats["llm_calls"], stats["root_calls"], stats["leaf_calls"]) == (5, 1, 4)
    assert stats["total_iterations"] == 1
    assert stats["max_depth_reached"] == 1  # a leaf call sits one level under its RLM
    assert stats["subcalls"] == 4
    kinds = [e.kind for e in result.trajectory]
    assert kinds.count("subcall_start") == kinds.count("subcall_end") == 2
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"


# --- per-run state -----------------------------------------------------------------------------


def _per_query_script(request: dict[str, Any]) -> str:
    query = request["messages"][1]["content"]
    if len(request["messages"]) == 2:
        return f'print("working on {query}")'
    return f'FINAL("answer to {query}")'


def test_concurrent_runs_from_threads_keep_their_own_figures(chat_server: ServerFactory) -> None:
    server = chat_server(_per_query_script)
    rlm = make(server)
    results: dict[str, CompletionResult] = {}

    def work(name: str) -> None:
        results[name] = rlm.complete_result(name, "ctx")

    threads = [threading.Thread(target=work, args=(f"job{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [f"job{i}" for i in range(4)]
    for name, result in results.items():
        assert result.answer == f"answer to {name}"
        assert result.stats["llm_calls"] == 2
        assert result.stats["total_iterations"] == 2
        queries = {e.query for e in result.trajectory if e.kind == "rlm_start"}  # type: ignore[attr-defined]
        assert queries == {name}
        assert [e.sequence for e in result.trajectory] == list(range(1, len(result.trajectory) + 1))
    assert rlm.stats["llm_calls"] == 8  # upstream's cumulative counter, as before


async def test_concurrent_runs_as_tasks(chat_server: ServerFactory) -> None:
    server = chat_server(_per_query_script)
    rlm = make(server)
    results = await asyncio.gather(*(rlm.acomplete_result(f"task{i}", "ctx") for i in range(4)))
    for i, result in enumerate(results):
        assert result.answer == f"answer to task{i}"
        assert result.stats["llm_calls"] == 2


# --- budgets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_budget_is_never_overshot_by_a_concurrent_batch(
    chat_server: ServerFactory, tmp_path: Path, isolation: str
) -> None:
    def script(request: dict[str, Any]) -> str:
        if is_root_iteration(request):
            return 'out = llm_query_batched(["p"] * 64)\nprint(out[0])'
        return "leaf"

    server = chat_server(script, latency=0.02)
    path = tmp_path / "run.jsonl"
    rlm = make(
        server, max_total_calls=10, max_concurrent_subcalls=64, trajectory_path=path, isolation=isolation
    )
    with pytest.raises(BudgetExceededError) as caught:
        rlm.complete("q", "c")
    exc = caught.value
    assert exc.metric == "llm_calls"
    assert exc.limit == 10
    assert len(server.requests) == 10
    assert exc.stats is not None
    assert exc.stats["llm_calls"] == 10
    assert exc.stats["budget"]["reserved_calls"] == 10
    assert exc.trajectory_path == str(path)
    _, events = read_trajectory(path)
    assert events[-1]["kind"] == "run_error"
    assert events[-1]["data"]["error_type"] == "BudgetExceededError"
    assert isinstance(rlm.last_run, FailedCompletionResult)


def test_token_budget_stops_after_the_crossing_reply(chat_server: ServerFactory) -> None:
    server = chat_server(lambda r: "print(1)")
    rlm = make(server, max_total_tokens=1)
    with pytest.raises(BudgetExceededError) as caught:
        rlm.complete("a query of several words", "ctx")
    assert caught.value.metric == "total_tokens"
    assert len(server.requests) == 1


def test_wall_time_budget_cuts_a_slow_call_short(chat_server: ServerFactory) -> None:
    server = chat_server(lambda r: "print(1)", latency=3.0)
    rlm = make(server, max_elapsed_seconds=0.2)
    with pytest.raises(BudgetExceededError) as caught:
        rlm.complete("q", "c")
    assert caught.value.metric == "elapsed_seconds"
    assert rlm.last_run is not None
    kinds = [e.kind for e in rlm.last_run.trajectory]
    assert kinds[-4:] == ["model_call_start", "model_call_error", "rlm_error", "run_error"]


def test_try_complete_result_returns_failures(chat_server: ServerFactory) -> None:
    server = chat_server(lambda r: "print(1)")
    result = make(server, max_total_calls=2).try_complete_result("q", "c")
    assert isinstance(result, FailedCompletionResult)
    assert not result.succeeded
    assert result.error_type == "BudgetExceededError"
    assert result.stats["llm_calls"] == 2
    assert result.to_dict()["termination_reason"] == "failed"


def test_budget_reservations_from_many_threads_stop_exactly_at_the_limit() -> None:
    budget = RunBudget(max_calls=100)
    granted: list[int] = []
    refused: list[BudgetExceededError] = []

    def take() -> None:
        for _ in range(50):
            try:
                budget.reserve_call()
                granted.append(1)
            except BudgetExceededError as exc:
                refused.append(exc)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 100
    assert len(refused) == 300
    assert budget.snapshot()["reserved_calls"] == 100
    assert {e.metric for e in refused} == {"llm_calls"}


def test_budget_usage_interface_latches() -> None:
    budget = RunBudget(max_tokens=100, max_cost_usd=1.0)
    budget.record_usage(50, 0.5)
    budget.reserve_call()
    with pytest.raises(BudgetExceededError, match="estimated_cost_usd"):
        budget.record_usage(60, 1.5)
    with pytest.raises(BudgetExceededError, match="estimated_cost_usd"):
        budget.check_deadline()
    assert budget.snapshot()["exceeded"] == "estimated_cost_usd"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_calls": 0},
        {"max_tokens": 1.5},
        {"max_cost_usd": -1.0},
        {"max_elapsed_seconds": float("inf")},
        {"max_calls": True},
    ],
)
def test_budget_rejects_bad_limits(kwargs: dict[str, Any]) -> None:
    from rlm_compat import ConfigurationError

    with pytest.raises(ConfigurationError, match="must be"):
        RunBudget(**kwargs)


# --- retries and provider errors ---------------------------------------------------------------


@pytest.mark.parametrize("api", ["2fb46cc", "0.5"])
def test_retries_after_429_and_500_honour_retry_after(
    chat_server: ServerFactory, tmp_path: Path, api: str
) -> None:
    """The RLM makes each retry itself: one provider request per attempt, each a counted call."""
    server = chat_server([ErrorReply(429, retry_after=0.2), ErrorReply(500, retry_after=0.2), 'FINAL("ok")'])
    path = tmp_path / "run.jsonl"
    rlm = make(server, max_retries=2, retry_backoff_seconds=0.01, api=api, trajectory_path=path)
    result = rlm.complete_result("q", "c")
    assert result.answer == "ok"
    # three requests, each its SDK's first try: nothing retried below the RLM
    assert len(server.requests) == 3
    assert {r["_headers"].get("x-stainless-retry-count", "0") for r in server.requests} == {"0"}
    received = [r["_received"] for r in server.requests]
    assert min(b - a for a, b in itertools.pairwise(received)) >= 0.2  # Retry-After honoured
    _, events = read_trajectory(path)
    kinds = lambda kind: [e["data"] for e in events if e["kind"] == kind]  # noqa: E731
    assert [(e["failed_attempt"], e["next_attempt"], e["delay_seconds"]) for e in kinds("model_retry")] == [
        (1, 2, 0.2),
        (2, 3, 0.2),
    ]
    assert [e["attempt"] for e in kinds("model_call_start")] == [1, 2, 3]
    assert [(e["error_type"], e["retrying"]) for e in kinds("model_call_error")] == [
        ("RateLimitError", True),
        ("InternalServerError", True),
    ]
    stats = result.stats
    assert (stats["llm_calls"], stats["retry_calls"], stats["failed_calls"]) == (3, 2, 2)
    assert stats["budget"]["reserved_calls"] == 3


def test_each_retry_is_reserved_in_the_budget(chat_server: ServerFactory) -> None:
    server = chat_server([ErrorReply(429, retry_after=0.01)] * 3 + ['FINAL("ok")'])
    rlm = make(server, max_retries=5, retry_backoff_seconds=0.01, max_total_calls=2)
    with pytest.raises(BudgetExceededError) as caught:
        rlm.complete("q", "c")
    assert caught.value.metric == "llm_calls"
    assert len(server.requests) == 2


def test_the_provider_sdk_never_retries_behind_the_rlm(chat_server: ServerFactory) -> None:
    from litellm.exceptions import RateLimitError

    server = chat_server([ErrorReply(429, retry_after=0.01)] * 4 + ['FINAL("ok")'])
    rlm = make(server, max_retries=1, retry_backoff_seconds=0.01)
    with pytest.raises(RateLimitError):
        rlm.complete("q", "c")
    assert len(server.requests) == 2  # the SDK's default of 2 retries per call would make 6


def test_default_retries_follow_the_api_preset() -> None:
    assert (RLM("m").max_retries, RLM("m").retry_backoff_seconds) == (2, 0.5)
    assert (RLM("m", api="0.5").max_retries, RLM("m", api="0.5").retry_backoff_seconds) == (0, 1.0)


@pytest.mark.parametrize(
    "where",
    ["constructor", "provider_options", "per_call"],
)
def test_sdk_retry_options_are_refused_with_the_rlm_setting_named(where: str) -> None:
    from rlm_compat import UnsupportedOptionError

    with pytest.raises(UnsupportedOptionError, match=r"RLM\(max_retries=N"):
        if where == "constructor":
            RLM("m", num_retries=3)
        elif where == "provider_options":
            RLM("m", provider_options={"num_retries": 3})
        else:
            RLM("m", client=ScriptedClient(['FINAL("x")']), isolation="inline").complete(
                "q", "c", num_retries=1
            )


def test_no_retries_when_switched_off(chat_server: ServerFactory) -> None:
    from litellm.exceptions import RateLimitError

    server = chat_server([ErrorReply(429, retry_after=0.05), 'FINAL("ok")'])
    rlm = make(server, max_retries=0)
    with pytest.raises(RateLimitError):
        rlm.complete("q", "c")
    assert len(server.requests) == 1
    assert rlm.last_run is not None
    assert rlm.last_run.stats["failed_calls"] == 1


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (RawReply(b"{not json"), "not valid JSON"),
        (RawReply(b""), "not valid JSON"),
        # litellm 1.9x raises its own error for it, later releases hand the empty list on
        (RawReply(b'{"choices": []}'), "no completion choice|no 'choices'"),
        (RawReply(b'{"choices": [{"message": {"role": "assistant", "content": null}}]}'), "NoneType content"),
    ],
    ids=["malformed", "empty-body", "no-choices", "null-content"],
)
def test_broken_replies_are_typed_errors(chat_server: ServerFactory, reply: RawReply, match: str) -> None:
    server = chat_server([reply])
    rlm = make(server, max_retries=0)
    with pytest.raises(Exception, match=match) as caught:
        rlm.complete("q", "c")
    # ours, or litellm's own typed error where that release checks the reply first
    assert isinstance(caught.value, ProviderResponseError) or type(caught.value).__module__.startswith(
        "litellm"
    )
    assert rlm.last_run is not None
    assert rlm.last_run.trajectory[-1].kind == "run_error"


# --- sub-calls ---------------------------------------------------------------------------------


def test_rlm_query_batched_runs_children_and_reports_item_errors(chat_server: ServerFactory) -> None:
    def script(request: dict[str, Any]) -> str:
        query = request["messages"][1]["content"]
        if query == "root":
            return 'out = rlm_query_batched(["a", "b", "bad"], ["1", "2", "3"])\nFINAL("|".join(out))'
        if query == "bad":
            return "print('never final')"
        return 'FINAL("child " + query + " " + context)'

    server = chat_server(script)
    rlm = make(server, max_iterations=2, max_depth=3)
    result = rlm.complete_result("root", "ctx")
    parts = result.answer.split("|")
    assert parts[:2] == ["child a 1", "child b 2"]
    assert parts[2].startswith("Error: MaxIterationsError: Max iterations (2)")
    end = next(e for e in result.trajectory if e.kind == "subcall_end")
    assert end.data["errors"] == 1 and end.data["count"] == 3
    assert result.stats["rlm_calls"] == 4


def test_rlm_query_at_the_depth_limit_is_a_plain_call(chat_server: ServerFactory) -> None:
    def script(request: dict[str, Any]) -> str:
        if is_root_iteration(request):
            return 'FINAL(rlm_query("sub", "text"))'
        return "plain:" + user_text(request).replace("\n", "/")

    server = chat_server(script)
    result = make(server, max_depth=1).complete_result("q", "c")
    assert result.answer == "plain:sub//text"
    assert result.stats["leaf_calls"] == 1


# --- the trajectory file -----------------------------------------------------------------------


def test_schema_file_is_generated_from_the_event_classes() -> None:
    assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == json_schema()
    documented = ROOT.joinpath("docs", "trajectory.md").read_text(encoding="utf-8")
    for kind in EVENT_TYPES:
        assert f"`{kind}`" in documented


@pytest.mark.parametrize("capture", [True, False])
def test_trajectory_validates_against_its_schema(
    chat_server: ServerFactory, tmp_path: Path, capture: bool
) -> None:
    def script(request: dict[str, Any]) -> str:
        if is_root_iteration(request):
            if len(request["messages"]) == 2:
                return 'x = llm_query("secret words")\nprint(x)'
            return 'FINAL("the secret answer")'
        return "secret leaf"

    server = chat_server(script)
    path = tmp_path / "t.jsonl"
    seen: list[TrajectoryEvent] = []
    rlm = make(server, trajectory_path=path, capture_trajectory_content=capture, on_event=seen.append)
    assert rlm.complete("secret query", "secret context") == "the secret answer"
    check = validator()
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        check.validate(line)
    header, events = read_trajectory(path)
    assert header["redacted"] is not capture
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert [e.sequence for e in seen] == [e["sequence"] for e in events]
    assert ("secret" in path.read_text(encoding="utf-8")) is capture
    assert {e["kind"] for e in events} >= {
        "run_start",
        "rlm_start",
        "model_call_start",
        "model_call_end",
        "repl_step",
        "subcall_start",
        "subcall_end",
        "final_answer",
        "rlm_end",
        "run_end",
    }


def test_a_provider_dying_mid_run_leaves_a_complete_trajectory(
    chat_server: ServerFactory, tmp_path: Path
) -> None:
    server = chat_server(["x = 1\nprint(x)", Disconnect()])
    path = tmp_path / "t.jsonl"
    rlm = make(server, trajectory_path=path, max_retries=0)
    with pytest.raises(Exception) as caught:
        rlm.complete("q", "c")
    check = validator()
    for line in path.read_text(encoding="utf-8").splitlines():
        check.validate(json.loads(line))
    _, events = read_trajectory(path)
    kinds = [e["kind"] for e in events]
    assert kinds == [
        "run_start",
        "rlm_start",
        "model_call_start",
        "model_call_end",
        "repl_step",
        "model_call_start",
        "model_call_error",
        "rlm_error",
        "run_error",
    ]
    assert events[-1]["data"]["error_type"] == type(caught.value).__name__


def test_a_trajectory_replays_to_the_same_run(chat_server: ServerFactory, tmp_path: Path) -> None:
    from rlm_compat.clients import ReplayClient

    def script(request: dict[str, Any]) -> str:
        if is_root_iteration(request):
            if request["messages"][1]["content"] == "child q":
                return 'FINAL("child says " + context)'
            if len(request["messages"]) == 2:
                return 'a = llm_query_batched(["x", "y"])\nprint(a)'
            return 'FINAL(rlm_query("child q", "hi") + " and " + str(len(a)))'
        return "leaf " + user_text(request)

    server = chat_server(script)
    path = tmp_path / "t.jsonl"
    first = make(server, trajectory_path=path, max_depth=3).complete_result("root q", "c")
    assert first.answer == "child says hi and 2"
    replay = ReplayClient.from_trajectory(path)
    again = RLM(PRICED, client=replay, isolation="inline", max_depth=3).complete_result("root q", "c")
    assert again.answer == first.answer
    replies = [e.data["reply"] for e in first.trajectory if e.kind == "model_call_end"]
    assert sorted(e.data["reply"] for e in again.trajectory if e.kind == "model_call_end") == sorted(replies)


def test_a_redacted_trajectory_cannot_be_replayed(chat_server: ServerFactory, tmp_path: Path) -> None:
    from rlm_compat.clients import ReplayClient

    server = chat_server(['FINAL("x")'])
    path = tmp_path / "t.jsonl"
    make(server, trajectory_path=path, capture_trajectory_content=False).complete("q", "c")
    with pytest.raises(ValueError, match="redacted"):
        ReplayClient.from_trajectory(path)


def test_concurrent_runs_need_their_own_trajectory_files(chat_server: ServerFactory, tmp_path: Path) -> None:
    from rlm_compat import ConfigurationError

    server = chat_server(_per_query_script)

    async def two(rlm: RLM) -> list[Any]:
        return await asyncio.gather(
            rlm.atry_complete_result("one", "c"), rlm.atry_complete_result("two", "c"), return_exceptions=True
        )

    shared = asyncio.run(two(make(server, trajectory_path=tmp_path / "same.jsonl")))
    assert sum(isinstance(r, ConfigurationError) for r in shared) == 1
    assert "{run}" in str(next(r for r in shared if isinstance(r, ConfigurationError)))

    separate = asyncio.run(two(make(server, trajectory_path=tmp_path / "run-{run}.jsonl")))
    paths = {r.trajectory_path for r in separate}
    assert len(paths) == 2
    for result in separate:
        header, events = read_trajectory(result.trajectory_path)
        assert Path(result.trajectory_path).name == f"run-{header['run_id']}.jsonl"
        assert events[-1]["data"]["answer"] == f"answer to {result.trajectory[0].query}"


def test_progress_lines_follow_the_run(chat_server: ServerFactory) -> None:
    import io

    from rlm_compat.record import ProgressPrinter

    def script(request: dict[str, Any]) -> str:
        if is_root_iteration(request):
            if len(request["messages"]) == 2:
                return 'print(llm_query_batched(["a", "b"]))'
            return 'FINAL("ok")'
        return "leaf"

    out = io.StringIO()
    make(server := chat_server(script), on_event=ProgressPrinter(out)).complete("q", "c")
    lines = out.getvalue().splitlines()
    assert len(server.requests) == 4
    assert sum(f"  {PRICED}  " in line for line in lines) == 4
    assert any("llm_query_batched x2  0 errors" in line for line in lines)
    assert any("step 1  ok" in line for line in lines)
    assert lines[-1].split("] ", 1)[1].startswith("done: 4 calls, ")


# --- events and observers ----------------------------------------------------------------------


def test_events_are_immutable_and_observers_cannot_break_a_run(chat_server: ServerFactory) -> None:
    server = chat_server(['FINAL("ok")'])

    def broken(event: TrajectoryEvent) -> None:
        raise RuntimeError("observer bug")

    rlm = make(server, observers=[broken])
    with pytest.warns(RuntimeWarning, match="observer bug"):
        result = rlm.complete_result("q", "c")
    assert result.answer == "ok"
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.trajectory[0].sequence = 5  # type: ignore[misc]
    first = result.trajectory[0].to_dict()
    assert set(first) == {"sequence", "kind", "elapsed_seconds", "depth", "node_id", "parent_id", "data"}
    assert "sk-loopback" not in json.dumps(result.to_dict())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_concurrent_subcalls": 0}, "max_concurrent_subcalls"),
        ({"max_retries": -1}, "max_retries"),
        ({"on_event": "not callable"}, "callables"),
        ({"max_total_calls": -3}, "max_calls"),
    ],
)
def test_record_options_are_validated(kwargs: dict[str, Any], match: str) -> None:
    from rlm_compat import ConfigurationError

    with pytest.raises(ConfigurationError, match=match):
        RLM("m", **kwargs)


def test_recursive_llm_050_names_are_there() -> None:
    import rlm_compat

    for name in (
        "BudgetExceededError",
        "CompletionResult",
        "FailedCompletionResult",
        "ProviderResponseError",
        "RunBudget",
        "RunResult",
        "TrajectoryEvent",
    ):
        assert name in rlm_compat.__all__
        assert getattr(rlm_compat, name) is not None
    for method in ("complete_result", "acomplete_result", "try_complete_result", "atry_complete_result"):
        assert callable(getattr(RLM, method))
    seen: list[TrajectoryEvent] = []
    rlm = RLM(
        "m",
        event_handler=seen.append,
        max_total_calls=3,
        max_total_tokens=100,
        max_total_cost_usd=1.0,
        max_elapsed_seconds=60,
        max_retries=1,
        max_concurrent_subcalls=4,
        capture_trajectory_content=False,
    )
    assert rlm.observers == [seen.append]
    assert rlm.trajectory == ()
    assert rlm.last_run is None
    assert issubclass(ProviderResponseError, rlm_compat.LLMCallError)


def test_usage_tracker_tallies_hand_fed_calls_with_the_run_stats_keys() -> None:
    """0.5.0's rlm.stats.UsageTracker: a direct baseline call reports the same keys as a run."""
    from types import SimpleNamespace

    from rlm_compat.record.usage import UsageTracker

    tracker = UsageTracker()
    tracker.record_call("m", 0)
    tracker.record_call("m", 1, is_leaf=True, is_retry=True)
    usage = SimpleNamespace(
        prompt_tokens=7, completion_tokens=2, total_tokens=9, prompt_tokens_details={"cached_tokens": 3}
    )
    tracker.record_response("m", SimpleNamespace(usage=usage), 0.25)
    tracker.record_response("m", {"usage": None}, None)
    stats = tracker.snapshot()
    assert (stats["llm_calls"], stats["root_calls"], stats["recursive_calls"], stats["leaf_calls"]) == (
        2,
        1,
        1,
        1,
    )
    assert (stats["retry_calls"], stats["max_depth_reached"], stats["usage_calls"]) == (1, 1, 1)
    assert (stats["prompt_tokens"], stats["total_tokens"], stats["cached_tokens"]) == (7, 9, 3)
    assert stats["estimated_cost_usd"] == 0.25 and stats["by_model"]["m"]["priced_calls"] == 1
    stats["by_model"]["m"]["calls"] = 99
    assert tracker.snapshot()["by_model"]["m"]["calls"] == 2
    assert UsageTracker().snapshot()["estimated_cost_usd"] is None


def test_aliased_rlm_stats_is_the_usage_module() -> None:
    from rlm_compat.dropin import MODULE_RENAMES

    assert MODULE_RENAMES["stats"] == "record.usage"
    assert MODULE_RENAMES["budget"] == "record.budget"


def test_rlm_query_batched_refuses_mismatched_contexts(chat_server: ServerFactory) -> None:
    server = chat_server(['rlm_query_batched(["one", "two"], ["context"])', 'FINAL("done")'])
    make(server).complete("q", "c")
    shown = server.requests[1]["messages"][-1]["content"]
    assert "ValueError" in shown and "2 queries but 1 contexts" in shown
