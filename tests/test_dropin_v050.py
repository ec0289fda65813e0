"""recursive-llm 0.5.0's module shapes (parser, repl constructor) and the release test runner's parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlm_compat import parser_v050 as p050
from rlm_compat.config import Limits, WorkerResourceLimits
from rlm_compat.errors import ConfigurationError, REPLError, UnsupportedOptionError
from rlm_compat.repl import REPLExecutor as BaseExecutor
from rlm_compat.repl_v050 import REPLExecutor, _worker_main
from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.cli import main
from rlm_compat.tools.dropin_tests import (
    RELEASES,
    Outcome,
    SuiteReport,
    junit_outcomes,
    out_of_scope,
    run_release_tests,
    whole_files_out_of_scope,
)


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ('FINAL("The answer is 42")', "The answer is 42"),
        ("  FINAL('x')  \n", "x"),
        ('FINAL("""multi\nline""")', "multi\nline"),
        (r'FINAL("say \"hi\"")', 'say "hi"'),
        ('FINAL(" padded ")', "padded"),
        ("FINAL(42)", None),
        ("FINAL(name)", None),
        ('x = 1\nFINAL("a")', None),
        ('if ok:\n    FINAL("a")', None),
        ('print("FINAL(a)")', None),
        ('FINAL("a") FINAL("b")', None),
    ],
)
def test_standalone_final(response: str, answer: str | None) -> None:
    assert p050.extract_final(response) == answer


def test_standalone_final_var_and_is_final() -> None:
    env = {"result": 7}
    assert p050.extract_final_var("FINAL_VAR(result)", env) == "7"
    assert p050.extract_final_var(" FINAL_VAR( result ) ", env) == "7"
    assert p050.extract_final_var("FINAL_VAR(missing)", env) is None
    assert p050.extract_final_var("x\nFINAL_VAR(result)", env) is None
    assert p050.extract_final_var_name('FINAL_VAR("result")') is None
    assert p050.is_final("FINAL(anything at all)") and p050.is_final("FINAL_VAR(x)")
    assert not p050.is_final("FINAL_VAR(a + b)") and not p050.is_final("x = FINAL('a')")
    assert p050.parse_response('FINAL("a")', env) == "a"
    assert p050.parse_response("FINAL_VAR(result)", env) == "7"
    assert p050.parse_response("code", env) is None


def test_worker_resource_limits_validate_and_keep_our_defaults() -> None:
    for bad in ({"memory_mb": 0}, {"cpu_time_seconds": -1}, {"max_open_files": 15}):
        with pytest.raises(ConfigurationError):
            WorkerResourceLimits(**bad)  # type: ignore[arg-type]
    assert not WorkerResourceLimits().configured
    limits = WorkerResourceLimits(memory_mb=128, max_open_files=64).to_limits()
    assert limits == Limits().replace(memory_mb=128, open_files=64)


def test_v050_executor_constructor() -> None:
    with REPLExecutor(
        timeout=2, max_output_chars=10, resource_limits=WorkerResourceLimits(memory_mb=512)
    ) as repl:
        assert isinstance(repl, BaseExecutor)
        assert repl.config.timeout == 2 and repl.config.limits.memory_mb == 512
        assert repl.api.name == "0.5"
        assert "truncated" in repl.execute("'x' * 50", {})
    with (
        REPLExecutor(timeout=5) as repl,
        pytest.raises(REPLError, match=r"^Execution timed out after 0\.2 seconds"),
    ):
        repl.execute("while True:\n    pass", {}, timeout=0.2)
    for bad in ({"timeout": 0}, {"max_output_chars": 0}):
        with pytest.raises(ValueError):
            REPLExecutor(**bad)  # type: ignore[arg-type]
    for bad_size in (0, -1, "1024", 1.5, True):
        with pytest.raises(ConfigurationError, match="max_snapshot_bytes"):
            REPLExecutor(max_snapshot_bytes=bad_size)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedOptionError, match="private helper"):
        _worker_main()
    with pytest.raises(REPLError, match="not running"):
        REPLExecutor().get_variable("x")


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_snapshot_cap_withholds_the_biggest_values_from_env(isolation: str) -> None:
    config = REPLExecutor().config.replace(isolation=isolation)
    with REPLExecutor(max_snapshot_bytes=1024, config=config) as repl:
        env: dict = {"context": "c" * 5000}
        repl.execute("small = 'x'\nbig = 'y' * 5000\nb = 'b' * 600\na = 'a' * 600", env)
        # smallest first, equal sizes by name: small, a fit; b and big do not
        assert env["small"] == "x" and env["a"] == "a" * 600
        assert "b" not in env and "big" not in env
        assert env["context"] == "c" * 5000  # never part of the snapshot
        assert repl.get_variable("big") == (True, "y" * 5000)
        assert repl.execute("len(big), len(b)", env) == "(5000, 600)"
        shown = repl.execute("sorted(SHOW_VARS())", env)
        assert "'big'" in shown and "'b'" in shown
        assert repl.render(env, "b") == "b" * 600 and "b" not in env
        env["big"] = "mine"  # the caller's value wins over the withheld one
        assert repl.execute("big", env) == "mine"
        assert env["big"] == "mine"
        repl.execute("del b\nbig = 'z' * 5000", env)
        assert repl.get_variable("b") == (False, None)
        assert "big" not in env and repl.get_variable("big") == (True, "z" * 5000)
        with pytest.raises(REPLError):
            repl.execute("huge = 'h' * 4000\n1 / 0", env)
        assert "huge" not in env and repl.get_variable("huge") == (True, "h" * 4000)
        repl.close()
        assert repl.execute("'big' in SHOW_VARS()", env) == "False"


def test_out_of_scope_list_names_each_test_with_a_reason() -> None:
    listed = out_of_scope("0.5.0")
    assert listed and all(reason for reason in listed.values())
    assert all("::" in test_id and "*" not in test_id for test_id in listed)
    assert out_of_scope("9.9.9") == {}
    assert whole_files_out_of_scope("0.5.0") == ["tests/test_codex.py", "tests/test_document_runner.py"]


def test_junit_outcomes_and_report(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    junit.write_text(
        """<testsuites><testsuite>
        <testcase classname="tests.test_a" name="test_ok"/>
        <testcase classname="tests.test_a.TestK" name="test_bad[1]"><failure message="assert 1 == 2&#10;more"/></testcase>
        <testcase classname="tests.test_b" name="test_skip"><skipped/></testcase>
        <testcase classname="" name="tests.test_c"><error message="collection failure"/></testcase>
        </testsuite></testsuites>"""
    )
    outcomes = junit_outcomes(junit)
    assert outcomes == [
        Outcome("tests/test_a.py::test_ok", "passed"),
        Outcome("tests/test_a.py::TestK::test_bad[1]", "failed", "assert 1 == 2"),
        Outcome("tests/test_b.py::test_skip", "skipped"),
        Outcome("tests/test_c.py", "failed", "collection failure"),
    ]
    report = SuiteReport((*outcomes, Outcome("tests/test_d.py::t", "out_of_scope", "why")))
    assert report.by_file()["tests/test_a.py"] == {"passed": 1, "failed": 1}
    text = report.render()
    assert "tests/test_a.py::TestK::test_bad[1]: assert 1 == 2" in text
    total = next(line for line in text.splitlines() if line.startswith("total"))
    assert total.split() == ["total", "1", "2", "1", "1"]


def test_unknown_release_is_refused() -> None:
    assert "0.5.0" in RELEASES
    with pytest.raises(ToolUsageError, match="known"):
        run_release_tests("0.4.0")


def test_cli_passes_arguments_after_double_dash_to_pytest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dropin-tests", str(tmp_path), "--", "-x"]) == 1
    assert "does not look like a ysz/recursive-llm checkout" in capsys.readouterr().err
    assert main(["dropin-tests", str(tmp_path), "--release", "0.5.0"]) == 1
    assert "not both" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["profiles", "--", "-x"])


def test_rlm_takes_the_release_repl_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    import rlm_compat.core
    from rlm_compat import RLM
    from rlm_compat.clients import ScriptedClient
    from rlm_compat.settings.run_config import run_config

    rlm = RLM(
        "m",
        api="0.5",
        repl_memory_limit_mb=512,
        repl_cpu_time_limit_seconds=10,
        repl_max_open_files=64,
        repl_max_snapshot_bytes=2048,
    )
    assert rlm.repl_config.limits == Limits().replace(memory_mb=512, cpu_seconds=10, open_files=64)
    assert rlm.repl_resource_limits == WorkerResourceLimits(512, 10, 64)
    assert run_config(rlm.settings, rlm.client)["repl_max_snapshot_bytes"] == 2048
    opened: list[BaseExecutor] = []

    class Recorded(BaseExecutor):  # the patch point 0.5.0's tests use: read when a node opens its REPL
        def __init__(self, **options: object) -> None:
            super().__init__(**options)  # type: ignore[arg-type]
            opened.append(self)

    monkeypatch.setattr(rlm_compat.core, "REPLExecutor", Recorded)
    ran = RLM(
        "m", api="0.5", client=ScriptedClient(['FINAL("x")']), repl_max_open_files=64, isolation="inline"
    )
    assert ran.complete("q", "c") == "x"
    assert [r.config.limits for r in opened] == [ran.repl_config.limits]
    base = Limits(memory_mb=100, reply_bytes=4096)
    assert RLM("m", limits=base, repl_max_open_files=32).repl_config.limits == base.replace(open_files=32)
    default = RLM("m")
    assert default.repl_config.limits == Limits() and default.repl_max_snapshot_bytes == 1_000_000
    for bad, match in (
        ({"repl_max_snapshot_bytes": 0}, "repl_max_snapshot_bytes must be an integer >= 1"),
        ({"repl_max_open_files": 8}, "repl_max_open_files must be at least 16"),
        ({"repl_memory_limit_mb": 0}, "repl_memory_limit_mb must be a positive integer"),
        ({"repl_cpu_time_limit_seconds": "x"}, "repl_cpu_time_limit_seconds must be"),
        (
            {"repl_memory_limit_mb": 64, "repl_config": default.repl_config},
            "cannot be combined with repl_config",
        ),
    ):
        with pytest.raises(ConfigurationError, match=match):
            RLM("m", **bad)


def test_batched_concurrency_default_follows_the_preset() -> None:
    from rlm_compat import RLM

    assert RLM("m", api="0.5").max_concurrent_subcalls == 4
    assert RLM("m").max_concurrent_subcalls == 16
    assert RLM("m", api="0.5", max_concurrent_subcalls=9).max_concurrent_subcalls == 9


def _fake_release(root: Path, body: str) -> Path:
    (root / "src" / "rlm").mkdir(parents=True)
    (root / "src" / "rlm" / "prompts.py").write_text(body)
    return root


def test_release_prompt_comparison_finds_the_first_difference(tmp_path: Path) -> None:
    from rlm_compat.tools.dropin_tests import PROMPT_GRID, compare_release_prompt

    same = _fake_release(
        tmp_path / "same",
        "from rlm_compat.prompts import build_system_prompt as ours\n"
        "def build_system_prompt(size, depth=0, max_depth=1):\n"
        "    return ours(size, depth, max_depth, version='0.5.0')\n",
    )
    outcome = compare_release_prompt(same, "0.5.0")
    assert (outcome.status, outcome.detail) == ("passed", f"identical for {len(PROMPT_GRID)} combinations")
    other = _fake_release(
        tmp_path / "other",
        "from rlm_compat.prompts import build_system_prompt as ours\n"
        "def build_system_prompt(size, depth=0, max_depth=1):\n"
        "    text = ours(size, depth, max_depth, version='0.5.0')\n"
        "    return text.replace('child RLM', 'child model') if max_depth == 3 else text\n",
    )
    outcome = compare_release_prompt(other, "0.5.0")
    assert outcome.status == "failed"
    assert "size=0 depth=0 max_depth=3 at character" in outcome.detail and "child model" in outcome.detail
    assert compare_release_prompt(same, "cc7a826").status == "failed"
    broken = _fake_release(tmp_path / "broken", "raise RuntimeError('boom')\n")
    assert "boom" in compare_release_prompt(broken, "0.5.0").detail
    assert compare_release_prompt(tmp_path, "0.5.0").status == "skipped"
