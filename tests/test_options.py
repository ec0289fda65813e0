"""RLM(**kwargs): model-call options forwarded, everything else a typed error naming it."""

from __future__ import annotations

import inspect

import pytest

from rlm_compat import RLM
from rlm_compat.compat import API_ENV, ApiSemantics, resolve_api
from rlm_compat.errors import ConfigurationError, UnknownOptionWarning, UnsupportedOptionError
from rlm_compat.options import (
    OWN_OPTIONS,
    PROVIDER_OPTIONS,
    RELEASE_050_OPTIONS,
    SDK_RETRY_OPTIONS,
    check_call_options,
    split_rlm_options,
)


def test_model_call_options_are_forwarded() -> None:
    rlm = RLM("m", temperature=0.2, max_tokens=50, seed=1)
    assert rlm.llm_kwargs == {"temperature": 0.2, "max_tokens": 50, "seed": 1}


def test_unknown_keyword_is_forwarded_with_a_warning_naming_it_and_its_closest_name() -> None:
    with pytest.warns(UnknownOptionWarning) as caught:
        rlm = RLM("m", max_iteration=10, frobnicate=True)
    assert rlm.llm_kwargs == {"max_iteration": 10, "frobnicate": True}
    # litellm's first import (to read its signature) may warn too (pydantic): only ours count
    ours = [w for w in caught if issubclass(w.category, UnknownOptionWarning)]
    text = str(ours[0].message)
    assert len(ours) == 1
    assert "'frobnicate'" in text and "'max_iteration' (did you mean 'max_iterations'?)" in text
    assert "provider_options=" in text
    assert ours[0].filename == __file__  # points at the caller's RLM(...) line


def test_every_release_050_option_is_a_constructor_parameter_and_refused_per_call() -> None:
    assert set(RELEASE_050_OPTIONS) <= set(inspect.signature(RLM.__init__).parameters)
    for name in sorted(set(RELEASE_050_OPTIONS) - SDK_RETRY_OPTIONS):  # those: "use RLM max_retries"
        with pytest.raises(
            UnsupportedOptionError, match=rf"'{name}' is set on RLM\(\.\.\.\), not per model call"
        ):
            check_call_options({name: 1}, caller="complete()")


def test_provider_options_pass_verbatim_and_are_checked_for_shape() -> None:
    rlm = RLM("m", provider_options={"vertex_project": "p", "temperature": 0})
    assert rlm.llm_kwargs == {"vertex_project": "p", "temperature": 0}
    with pytest.raises(ConfigurationError, match="provider_options must be a dict"):
        RLM("m", provider_options=["vertex_project"])


def test_a_named_litellm_parameter_outside_the_static_list_is_accepted() -> None:
    import warnings

    import litellm  # its first import may warn (pydantic); this test is about ours

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # whichever named parameter this litellm has that the static list lacks (it grows by release)
        named = set(inspect.signature(litellm.acompletion).parameters) - {
            "model",
            "messages",
            "kwargs",
            "api_key",
        }
        extra = sorted(named - PROVIDER_OPTIONS)[0]
        assert check_call_options({extra: "k"}) == {extra: "k"}
        assert RLM("m", provider_options={"vertex_project": "p"}).llm_kwargs == {"vertex_project": "p"}


def test_model_and_messages_are_never_taken_for_model_call_options() -> None:
    for name in ("model", "messages"):
        with pytest.warns(UnknownOptionWarning, match=name):
            check_call_options({name: "x"})


def test_static_provider_options_are_litellm_parameters_or_documented_kwargs() -> None:
    import litellm

    named = set(inspect.signature(litellm.acompletion).parameters)
    # litellm documents these as **kwargs of completion() (routing, retries, headers, mocking)
    documented_kwargs = {
        "headers",
        "extra_body",
        "num_retries",
        "drop_params",
        "custom_llm_provider",
        "mock_response",
        "caching",
        "fallbacks",
        "metadata",
        "store",  # an OpenAI chat parameter; a named one of litellm's only from about 1.100
    }
    assert PROVIDER_OPTIONS - named <= documented_kwargs


def test_api_preset_is_chosen_by_keyword_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RLM("m").api == ApiSemantics.v2fb46cc()
    assert RLM("m", api="0.5").api == ApiSemantics.v050()
    monkeypatch.setenv(API_ENV, "0.5")
    assert RLM("m").api.name == "0.5"
    with pytest.raises(ConfigurationError, match="unknown api"):
        RLM("m", api="0.7")


@pytest.mark.parametrize("api", ["2fb46cc", "0.5"])
def test_litellm_retries_are_refused_in_every_release(api: str) -> None:
    with pytest.raises(UnsupportedOptionError, match=r"RLM\(max_retries=N"):
        split_rlm_options({"api": api, "num_retries": 2})


def test_presets_are_frozen_data() -> None:
    v050 = resolve_api("0.5")
    assert v050.max_depth_default == 1 and ApiSemantics().max_depth_default == 5
    with pytest.raises(AttributeError):
        v050.stats_per_run = False  # type: ignore[misc]
    assert v050.replace(show_vars=False).show_vars is False
    with pytest.raises(ConfigurationError):
        v050.replace(nope=True)
    with pytest.raises(ConfigurationError):
        resolve_api(3)  # type: ignore[arg-type]


def test_child_rlm_inherits_options() -> None:
    rlm = RLM("m", api="0.5", temperature=0)
    child = rlm.settings.child()
    assert child.api is rlm.api and child.llm_kwargs == {"temperature": 0}
    assert (child.depth, child.model, child.final_answer_validator) == (1, rlm.recursive_model, None)


def test_every_constructor_keyword_has_one_parameter_row_and_the_tables_derive_from_it() -> None:
    from rlm_compat.settings import PARAMETERS
    from rlm_compat.settings.run_config import run_config

    params = set(inspect.signature(RLM.__init__).parameters) - {"self", "llm_kwargs"}
    assert params == set(PARAMETERS) == OWN_OPTIONS
    assert {n: p.doc for n, p in PARAMETERS.items() if p.release == "0.5.0"} == RELEASE_050_OPTIONS
    rlm = RLM("m", api_key="sk-secret", recursive_max_iterations=2)
    config = run_config(rlm.settings, rlm.client)
    assert {n for n, p in PARAMETERS.items() if p.record is not None} <= set(config)
    assert config["recursive_max_iterations"] == 2 and "sk-secret" not in str(config)


def test_recursive_max_iterations_holds_child_rlms_shorter_than_the_root() -> None:
    from rlm_compat.clients import ScriptedClient

    client = ScriptedClient(
        [
            '```python\nprint(rlm_query("sub", "ctx"))\n```',
            "```python\nx = 1\n```",  # the child's only iteration: no final answer
            'FINAL("done")',
        ]
    )
    rlm = RLM("m", client=client, max_iterations=5, recursive_max_iterations=1, isolation="inline")
    assert rlm.complete("q", "c") == "done"
    assert "Max iterations (1) exceeded" in client.calls[2].messages[-1]["content"]
    assert rlm.settings.child().max_iterations == 1 and rlm.max_iterations == 5
    assert RLM("m", max_iterations=4).settings.child().max_iterations == 4
    with pytest.raises(ConfigurationError, match="recursive_max_iterations must be an integer >= 0"):
        RLM("m", recursive_max_iterations=-1)
