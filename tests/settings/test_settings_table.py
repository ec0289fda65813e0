"""The options table is the one declaration of an RLM option; everything else is derived from it.

A keyword is a :class:`~rlm_compat.settings.Settings` field made with ``option()`` or a ``FOLDED``
row. These tests hold the derived places to the table — the constructor's signature and
docstring, the facade's read-only attributes, the run record's ``config``, the option tables of
:mod:`rlm_compat.options` and the ``rlm-compat run`` flags — so adding a row is the whole change.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from locations import ROOT

from rlm_compat import RLM
from rlm_compat.clients import ScriptedClient
from rlm_compat.errors import ConfigurationError
from rlm_compat.events import ReplStep
from rlm_compat.options import OWN_OPTIONS, RELEASE_050_OPTIONS
from rlm_compat.settings import FOLDED, KEPT, PARAMETERS, RECORDED, REQUIRED, Settings
from rlm_compat.settings.run_config import run_config
from rlm_compat.testing import ScriptedChatServer
from rlm_compat.tools.cli import main

ServerFactory = Callable[..., ScriptedChatServer]


def test_parameters_are_the_kept_fields_and_the_folded_rows() -> None:
    assert set(PARAMETERS) == set(KEPT) | set(FOLDED)
    assert not set(KEPT) & set(FOLDED)
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert set(KEPT) <= fields


def test_the_constructor_signature_is_the_table() -> None:
    params = list(inspect.signature(RLM.__init__).parameters.values())[1:]
    assert [p.name for p in params[:-1]] == list(PARAMETERS)
    for p in params[:-1]:
        row = PARAMETERS[p.name]
        assert p.default == (inspect.Parameter.empty if row.default is REQUIRED else row.default)
        assert p.annotation == row.annotation
        assert (p.kind is inspect.Parameter.KEYWORD_ONLY) is (not row.positional)
    assert params[-1].kind is inspect.Parameter.VAR_KEYWORD


def test_the_real_positional_defaults_are_the_rows() -> None:
    """The def's own positional parameters (upstream's, written out) agree with their rows."""
    code = RLM.__init__.__code__
    names = code.co_varnames[1 : code.co_argcount]
    given = RLM.__init__.__defaults__ or ()
    defaults = dict(zip(names[len(names) - len(given) :], given, strict=True))
    assert list(names) == [n for n, row in PARAMETERS.items() if row.positional]
    for name in names:
        assert defaults.get(name, REQUIRED) == PARAMETERS[name].default


def test_every_keyword_is_documented_in_the_constructor_docstring() -> None:
    doc = RLM.__init__.__doc__ or ""
    for name, row in PARAMETERS.items():
        assert row.doc
        if not row.positional:
            assert f"``{name}``: {row.doc}" in doc


def test_every_kept_field_is_a_read_only_attribute() -> None:
    rlm = RLM("m", client=ScriptedClient([]))
    for name in KEPT:
        assert getattr(rlm, name) == getattr(rlm.settings, name)
        with pytest.raises(AttributeError, match="frozen"):
            setattr(rlm, name, None)


def test_the_record_keeps_what_the_table_says() -> None:
    rlm = RLM("m", client=ScriptedClient([]), api_key="sk-secret", final_answer_validator=lambda a: None)
    config = run_config(rlm.settings, rlm.client)
    assert list(RECORDED) == [n for n in PARAMETERS if n in RECORDED]
    assert set(RECORDED) <= set(config)
    assert {n for n, row in PARAMETERS.items() if row.record is not None} == set(RECORDED)
    assert "api_key" not in config and "sk-secret" not in json.dumps(config)
    assert config["final_answer_validator"] is True


def test_the_option_tables_come_from_the_rows() -> None:
    assert frozenset(PARAMETERS) == OWN_OPTIONS
    assert {n: row.doc for n, row in PARAMETERS.items() if row.release == "0.5.0"} == RELEASE_050_OPTIONS


def test_a_child_applies_each_rows_child_change() -> None:
    rlm = RLM(
        "root",
        "leaf",
        client=ScriptedClient([]),
        max_iterations=9,
        recursive_max_iterations=3,
        final_answer_validator=lambda a: None,
    )
    child = rlm.settings.child()
    assert (child.model, child.depth, child.max_iterations) == ("leaf", 1, 3)
    assert child.final_answer_validator is None
    assert child.child().max_iterations == 3


@pytest.mark.parametrize(
    ("keyword", "value", "message"),
    [
        ("model", "", "model must be a non-empty string"),
        ("max_depth", -1, "max_depth must be an integer >= 0"),
        ("max_iterations", True, "max_iterations must be an integer >= 0"),
        ("recursive_max_iterations", -2, "recursive_max_iterations must be an integer >= 0"),
        ("max_concurrent_subcalls", 0, "max_concurrent_subcalls must be an integer >= 1"),
        ("prompt_version", "9.9", "unknown prompt_version '9.9'"),
        ("final_answer_validator", 3, "final_answer_validator must be a callable"),
        ("_current_depth", -1, "_current_depth must be an integer >= 0"),
        ("max_output_chars", -1, "max_output_chars must be an integer >= 0"),
        ("observers", [3], "event observers must be callables"),
        ("repl_memory_limit_mb", 0, "repl_memory_limit_mb"),
    ],
)
def test_each_check_names_its_keyword(keyword: str, value: Any, message: str) -> None:
    given: dict[str, Any] = {"model": "m", keyword: value}
    with pytest.raises(ConfigurationError, match=message):
        RLM(**given)


def test_under_the_05_preset_limits_refuse_zero() -> None:
    with pytest.raises(ConfigurationError, match="max_iterations must be an integer >= 1"):
        RLM("m", api="0.5", max_iterations=0)
    assert RLM("m", max_iterations=0).max_iterations == 0


def _sample(name: str, annotation: str) -> str:
    if name == "profile":
        return "upstream"
    if name == "prompt_version":
        return "2fb46cc"
    if name == "isolation":
        return "inline"
    if name == "recursive_model":
        return "openai/m2"
    return "70000" if annotation.startswith("int") else "700.5" if annotation.startswith("float") else "x"


def test_every_flag_reaches_the_rlm(
    chat_server: ServerFactory, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One real run with every ``run`` flag the table declares; the run record shows each value."""
    server = chat_server(["FINAL('ok')"])
    fixed = {
        "model": "openai/m",
        "api_base": server.base_url,
        "api_key": "sk-loop",
        "trajectory_path": str(tmp_path / "run.jsonl"),
    }
    argv, expected = ["run", "q", "--context", "c", "--json", "--progress", "off"], {}
    for name, row in PARAMETERS.items():
        flag = row.flag
        if flag is None:
            continue
        option = flag.option_string(name)
        if flag.is_switch:
            argv.append(option)
            expected[name] = flag.const
            continue
        value = fixed.get(name) or _sample(name, row.annotation)
        argv += [option, value]
        typed: Any = value
        if row.annotation.startswith(("int", "float")):
            typed = int(value) if row.annotation.startswith("int") else float(value)
        expected[name] = typed
    assert main(argv) == 0, capsys.readouterr().err
    config = json.loads(capsys.readouterr().out)["config"]
    recorded = {name: config[name] for name in expected if name in config}
    assert recorded == {name: value for name, value in expected.items() if name in RECORDED}
    assert len(recorded) >= 15
    assert (tmp_path / "run.jsonl").exists()


def test_the_cli_docs_name_every_flag() -> None:
    table = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, row in PARAMETERS.items():
        if row.flag is not None:
            assert f"`{row.flag.option_string(name)}" in table, name


def test_recursive_repl_timeout_holds_child_steps_shorter(chat_server: ServerFactory) -> None:
    """The option added as one row: a child's endless step is cut at 0.5 s, the root's limit is 60 s.

    Through litellm to the loopback server: the root starts a child RLM, whose first step spins;
    the child sees the timeout, answers, and the root finishes with the child's answer.
    """
    server = chat_server(
        [
            '```python\nr = recursive_llm("sub", "piece")\nprint(r)\n```',
            "```python\nwhile True:\n    pass\n```",
            'FINAL("child done")',
            "FINAL_VAR(r)",
        ]
    )
    rlm = RLM(
        "openai/m",
        api_base=server.base_url,
        api_key="sk-loop",
        repl_timeout=60,
        recursive_repl_timeout=0.5,
    )
    assert rlm.settings.child().repl.timeout == 0.5 and rlm.settings.repl.timeout == 60
    assert rlm.complete("q", "ctx") == "child done"
    steps = [e for e in rlm.trajectory if isinstance(e, ReplStep)]
    spun = [e for e in steps if e.depth == 1 and e.error]
    assert spun and "timeout" in spun[0].output.lower() and spun[0].duration_seconds < 30
    assert rlm.last_run is not None and rlm.last_run.config["recursive_repl_timeout"] == 0.5
    with pytest.raises(ConfigurationError, match="recursive_repl_timeout must be a number of seconds > 0"):
        RLM("m", recursive_repl_timeout=0)
