"""`rlm-compat serve`'s rules as data: requests, limits, model names and outcomes (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlm_compat.errors import BudgetExceededError, MaxIterationsError
from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.serve import RLM_KEYS, SERVER_OWNED, ApiError, ModelRegistry, ModelSpec, ServeLimits
from rlm_compat.tools.serve._outcomes import error_for_failure
from rlm_compat.tools.serve._protocol import parse_request

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
