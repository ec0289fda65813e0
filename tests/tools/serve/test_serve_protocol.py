"""`rlm-compat serve`'s rules as data: requests, limits, model names and outcomes (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlm_compat.errors import BudgetExceededError, MaxIterationsError
from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.serve import RLM_KEYS, SERVER_OWNED, ApiError, ModelRegistry, ModelSpec, ServeLimits
from rlm_compat.tools.serve.chat_protocol import parse_request
from rlm_compat.tools.serve.outcomes import error_for_failure

LIMITS = ServeLimits(max_calls=10, max_seconds=60.0, max_context_chars=100)


def body(**fields: object) -> bytes:
    return json.dumps({"model": "rlm:m", "messages": [{"role": "user", "content": "q"}], **fields}).encode()


def test_a_request_lowers_the_servers_caps_and_never_raises_them() -> None:
    chat = parse_request(body(rlm={"max_calls": 3}), LIMITS)
    assert chat.budget == {
        "max_total_calls": 3,
        "max_total_tokens": None,
        "max_total_cost_usd": None,
        "max_elapsed_seconds": 60.0,
    }
    with pytest.raises(ApiError, match="at most 10") as caught:
        parse_request(body(rlm={"max_calls": 11}), LIMITS)
    assert caught.value.status == 400 and caught.value.code == "limit_exceeded"
    for bad in ({"max_calls": 1.5}, {"max_calls": 0}, {"max_seconds": True}):
        with pytest.raises(ApiError):
            parse_request(body(rlm=bad), LIMITS)


def test_query_context_and_earlier_messages() -> None:
    messages = [
        {"role": "system", "content": "notes"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    chat = parse_request(body(messages=messages, stream=True, stream_options={"include_usage": True}), LIMITS)
    assert (chat.query, chat.earlier, chat.context, chat.stream, chat.include_usage) == (
        "ab",
        "system: notes",
        None,
        True,
        True,
    )
    with pytest.raises(ApiError, match="at most 100") as caught:
        parse_request(body(rlm={"context": "x" * 101}), LIMITS)
    assert caught.value.code == "context_length_exceeded"


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"[]", "JSON object"),
        (b"\xff", "not valid JSON"),
        (body(model=""), "'model'"),
        (body(messages=[]), "'messages'"),
        (body(messages=[{"role": "user", "content": {"x": 1}}]), "content"),
        (body(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), "text content"),
        (body(n=2), "'n'"),
        (body(stream="yes"), "'stream'"),
        (body(rlm={"documents": "a.txt"}), "documents"),
        (body(rlm={"contxt": "typo"}), "contxt"),
    ],
)
def test_bad_requests_name_what_is_wrong(raw: bytes, text: str) -> None:
    with pytest.raises(ApiError, match=text) as caught:
        parse_request(raw, LIMITS)
    assert caught.value.status == 400 and set(caught.value.body()["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }


def test_outcomes_map_to_statuses() -> None:
    cases = [
        (BudgetExceededError("llm_calls", 2, 3), 422, "budget_exceeded"),
        (BudgetExceededError("elapsed_seconds", 1, 1.5), 504, "run_timeout"),
        (MaxIterationsError("max"), 422, "max_iterations"),
    ]
    for exc, status, code in cases:
        error = error_for_failure(exc, type(exc).__name__, str(exc))
        assert (error.status, error.code, error.headers()["x-should-retry"]) == (status, code, "false")
    for name, status in (
        ("RateLimitError", 429),
        ("Timeout", 504),
        ("InternalServerError", 502),
        ("KeyError", 500),
    ):
        assert error_for_failure(None, name, "m").status == status


def test_model_names_config_files_and_their_errors(tmp_path: Path) -> None:
    template = ModelSpec.of("t", "t", api_base="http://127.0.0.1:1/v1")
    registry = ModelRegistry(template=template, roots=["openai/a"], allow=["openai/b-*"])
    assert registry.names() == ["rlm:openai/a"]
    spec = registry.resolve("rlm:openai/b-1")
    assert spec is not None and (spec.name, spec.model, spec.rlm["api_base"]) == (
        "rlm:openai/b-1",
        "openai/b-1",
        template.rlm["api_base"],
    )
    assert registry.resolve("rlm:openai/c") is None and registry.resolve("openai/a") is None
    config = tmp_path / "models.toml"
    config.write_text('[models.mini]\nmodel = "openai/x"\nmax_depth = 2\nclient = "openai-compatible"\n')
    named = ModelRegistry.from_toml(config)
    assert named.names() == ["mini"] and named.resolve("mini") == ModelSpec.of(
        "mini", "openai/x", max_depth=2, client="openai-compatible"
    )
    for text, error in (
        ('[models.m]\nmodle = "x"\n', "unknown key"),
        ("[models.m]\nmax_depth = 2\n", "needs model"),
        ('[models.m]\nmodel = "x"\nisolation = "vm"\n', "isolation"),
        ('[models.m]\nmodel = "x"\nclient = "grpc"\n', "client"),
        ("[server]\nport = 1\n", "top-level"),
        ("not toml [", "model config"),
    ):
        config.write_text(text)
        with pytest.raises(ToolUsageError, match=error):
            ModelRegistry.from_toml(config)
    with pytest.raises(ToolUsageError, match="no models"):
        ModelRegistry()


def test_a_model_table_takes_every_plain_rlm_keyword_from_the_options_table(tmp_path: Path) -> None:
    """Servable keywords come from the table: a keyword added there is settable here, unedited."""
    from rlm_compat.settings import PARAMETERS

    plain = {name for name, row in PARAMETERS.items() if row.plain}
    assert plain - SERVER_OWNED == RLM_KEYS and {"recursive_repl_timeout", "max_output_chars"} <= RLM_KEYS
    config = tmp_path / "models.toml"
    config.write_text(
        '[models.m]\nmodel = "openai/x"\nrecursive_repl_timeout = 0.5\nmax_output_chars = 500\n'
        'prompt_version = "2fb46cc"\n'
    )
    spec = ModelRegistry.from_toml(config).resolve("m")
    assert spec is not None
    assert dict(spec.rlm) == {
        "profile": "fixed",
        "recursive_repl_timeout": 0.5,
        "max_output_chars": 500,
        "prompt_version": "2fb46cc",
    }
    for text, error in (
        (
            '[models.m]\nmodel = "x"\nrecursive_repl_timeout = 0\n',
            "models.m: model 'm': recursive_repl_timeout",
        ),
        ('[models.m]\nmodel = "x"\nmax_total_calls = 3\n', "unknown key"),
        ('[models.m]\nmodel = "x"\napi_key = "sk-in-a-file"\n', "unknown key"),
        ('[models.m]\nmodel = "x"\nprompt_version = "9"\n', "unknown prompt_version"),
    ):
        config.write_text(text)
        with pytest.raises(ToolUsageError, match=error):
            ModelRegistry.from_toml(config)


def test_a_spec_reads_its_key_from_its_variable_and_never_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ModelSpec.of("m", "x", api_key_env="RLM_TEST_PROVIDER_KEY")
    with pytest.raises(ToolUsageError, match="RLM_TEST_PROVIDER_KEY"):
        spec.api_key()
    monkeypatch.setenv("RLM_TEST_PROVIDER_KEY", "sk-secret-value-1")
    assert spec.api_key() == "sk-secret-value-1"
    assert "sk-secret-value-1" not in json.dumps(spec.public())


def test_server_limits_are_checked() -> None:
    for bad in ({"max_concurrent": 0}, {"max_queue": -1}, {"max_calls": 0}, {"max_seconds": -1.0}):
        with pytest.raises(ToolUsageError):
            ServeLimits(**bad)  # type: ignore[arg-type]


# --- issue 31: limits, bodies, parameters, outcomes, documents, retention ---------------------------

SMALL = ServeLimits(max_context_chars=100, max_query_chars=10)


def test_the_query_and_the_context_source_are_counted_against_their_limits() -> None:
    assert parse_request(body(rlm={"context": "c"}), SMALL).context_source == "rlm"
    assert (
        parse_request(body(messages=[{"role": "user", "content": "q" * 100}]), SMALL).context_source
        == "query"
    )
    with pytest.raises(ApiError) as caught:
        parse_request(body(messages=[{"role": "user", "content": "q" * 101}]), SMALL)
    assert (caught.value.code, caught.value.param) == ("context_length_exceeded", "messages[0].content")
    with pytest.raises(ApiError) as caught:
        parse_request(body(rlm={"context": "c"}, messages=[{"role": "user", "content": "q" * 11}]), SMALL)
    assert (caught.value.code, caught.value.param) == ("query_too_large", "messages[0].content")
    conversation = [{"role": "system", "content": "s" * 100}, {"role": "user", "content": "q"}]
    with pytest.raises(ApiError) as caught:
        parse_request(body(messages=conversation), SMALL)
    assert (caught.value.code, caught.value.param) == ("context_length_exceeded", "messages")
    empty = parse_request(body(rlm={"context": ""}), SMALL)
    assert (empty.context_source, empty.context) == ("rlm", "")


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b"[" * 50_000 + b"]" * 50_000, None),
        (body(rlm={"context": json.loads("[" * 40 + "]" * 40)}), "rlm.context"),
        (body(messages=[{"role": "user", "content": "\ud800"}]), "messages[0].content"),
        (body(rlm={"max_seconds": float("nan")}), "rlm.max_seconds"),
        (body(rlm={"max_calls": float("inf")}), "rlm.max_calls"),
        (b'{"n": 1' + b"0" * 5000 + b"}", None),
        (body(rlm={"documents": ["a", "b\x00"]}), "rlm.documents[1]"),
        (b"[" + b"0," * 1_000_001 + b"0]", None),
    ],
)
def test_bodies_json_allows_but_nothing_downstream_can_carry_are_400s(raw: bytes, param: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        parse_request(raw, LIMITS)
    assert caught.value.status == 400 and caught.value.param == param


def test_a_long_text_full_of_commas_is_one_value() -> None:
    assert parse_request(body(rlm={"context": "a,[{" * 300_000}), ServeLimits()).context


def test_parameters_are_passed_to_the_root_model_or_refused() -> None:
    chat = parse_request(body(temperature=0.5, seed=3, max_tokens=9, user="u", tools=[], stop=None), LIMITS)
    assert chat.options == {"temperature": 0.5, "seed": 3, "max_tokens": 9}
    for fields, param, code in (
        ({"tools": [{"type": "function"}]}, "tools", "unsupported_parameter"),
        ({"response_format": {"type": "json_object"}}, "response_format", "unsupported_parameter"),
        ({"stop": "x"}, "stop", "unsupported_parameter"),
        ({"top_logprobs": 2}, "top_logprobs", "unsupported_parameter"),
        ({"frobnicate": True}, "frobnicate", "unsupported_parameter"),
        ({"temperature": "hot"}, "temperature", None),
        ({"seed": 1.5}, "seed", None),
        ({"max_tokens": 5, "max_completion_tokens": 5}, "max_tokens", None),
    ):
        with pytest.raises(ApiError) as caught:
            parse_request(body(**fields), LIMITS)
        assert (caught.value.param, caught.value.code) == (param, code)


def test_one_answer_per_provider_failure_whichever_client_saw_it() -> None:
    lean = "model 'x': the provider answered HTTP {}: 'no'"
    for litellm_name, status, code in (
        ("AuthenticationError", 401, "provider_authentication"),
        ("RateLimitError", 429, "provider_rate_limited"),
        ("InternalServerError", 500, "provider_error"),
        ("BadRequestError", 400, "provider_error"),
    ):
        via_litellm = error_for_failure(None, litellm_name, "m")
        via_lean = error_for_failure(None, "ProviderStatusError", lean.format(status))
        assert (via_litellm.status, via_litellm.code) == (via_lean.status, via_lean.code)
        assert via_lean.code == code
    for litellm_name, lean_name in (
        ("Timeout", "ProviderTimeoutError"),
        ("APIConnectionError", "ProviderConnectionError"),
        ("APIError", "ProviderResponseError"),
    ):
        assert error_for_failure(None, litellm_name, "m").code == error_for_failure(None, lean_name, "m").code


def test_budget_errors_name_the_requests_field() -> None:
    for exc, param, status in (
        (BudgetExceededError("llm_calls", 2, 3), "rlm.max_calls", 422),
        (BudgetExceededError("total_tokens", 10, 12), "rlm.max_tokens", 422),
        (BudgetExceededError("elapsed_seconds", 1, 1.5), "rlm.max_seconds", 504),
    ):
        for error in (
            error_for_failure(exc, "BudgetExceededError", str(exc)),
            error_for_failure(None, "BudgetExceededError", str(exc)),
        ):
            assert (error.param, error.status) == (param, status) and "max_total" not in error.message


def test_documents_are_checked_by_their_metadata_and_read_bounded(tmp_path: Path) -> None:
    import os
    import socket

    from rlm_compat.tools.serve.documents import DocumentRefused, read_document

    (tmp_path / "ok.txt").write_text("hello", encoding="utf-8")
    (tmp_path / "bad.bin").write_bytes(b"\xff\xfe")
    with open(tmp_path / "huge", "wb") as f:
        f.truncate(10**9)
    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / "link").symlink_to("/etc/hostname")
    assert read_document(tmp_path, "ok.txt", 5) == "hello"
    for name, limit, text in (
        ("ok.txt", 4, "at most 4"),
        ("huge", 10**6, "1,000,000,000 bytes"),
        ("fifo", 100, "not a regular file"),
        ("sock", 100, "not a regular file"),
        (".", 100, "directory"),
        ("../x", 100, "outside"),
        ("link", 100, "outside"),
        ("/etc/hostname", 100, "relative"),
        ("bad.bin", 100, "UTF-8"),
        ("nothing", 100, "no such"),
    ):
        with pytest.raises(DocumentRefused, match=text):
            read_document(tmp_path, name, limit)
    sock.close()


def test_trajectory_retention_removes_the_oldest_first(tmp_path: Path) -> None:
    import os

    from rlm_compat.tools.serve.records import TrajectoryStore

    for i in range(5):
        path = tmp_path / f"r{i}.jsonl"
        path.write_text("x" * 10)
        os.utime(path, ns=(i * 10**9, i * 10**9))
    TrajectoryStore(tmp_path, str, keep_runs=3).prune()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r2.jsonl", "r3.jsonl", "r4.jsonl"]
    TrajectoryStore(tmp_path, str, keep_bytes=15).prune()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r4.jsonl"]


def test_a_server_of_lean_models_only_never_needs_litellm(tmp_path: Path) -> None:
    lean = ModelSpec.of("t", "t", client="openai-compatible")
    assert not ModelRegistry(template=lean, roots=["openai/a"]).uses_litellm()
    assert ModelRegistry(template=ModelSpec.of("t", "t"), roots=["openai/a"]).uses_litellm()
    assert not ModelRegistry([lean], template=ModelSpec.of("t", "t")).uses_litellm()


async def test_bodies_over_the_budget_wait_their_turn_and_give_up_with_429() -> None:
    import asyncio

    from rlm_compat.tools.serve.gate import BodyBudget

    budget = BodyBudget(total=10, timeout=0.2)
    second = budget.reserve(5)  # kept: a dropped context manager would give its bytes back
    async with budget.reserve(8):
        waiting = asyncio.ensure_future(second.__aenter__())
        await asyncio.sleep(0.05)
        assert budget.waiting == 1 and not waiting.done()
    await waiting  # admitted once the first body was read
    assert budget.reserved == 5
    with pytest.raises(ApiError) as caught:
        async with budget.reserve(6):
            pass
    assert caught.value.status == 429 and budget.reserved == 5
    async with BodyBudget(total=1, timeout=0.1).reserve(100):  # one body is always admitted
        pass


def test_the_rlm_retries_the_lean_clients_failures_as_it_retries_litellms() -> None:
    from rlm_compat.errors import ProviderResponseError
    from rlm_compat.openai_client import (
        ProviderConnectionError,
        ProviderRateLimitError,
        ProviderStatusError,
        ProviderTimeoutError,
    )
    from rlm_compat.retry import is_retryable, retry_after

    for error, retried in (
        (ProviderStatusError("m", 500), True),
        (ProviderStatusError("m", 409), True),
        (ProviderStatusError("m", 401), False),
        (ProviderStatusError("m", 400), False),
        (ProviderRateLimitError("m", 429, 2.5), True),
        (ProviderTimeoutError("m"), True),
        (ProviderConnectionError("m"), True),
        (ProviderResponseError("m"), True),
    ):
        assert is_retryable(error) is retried, error
    assert retry_after(ProviderRateLimitError("m", 429, 2.5)) == 2.5
