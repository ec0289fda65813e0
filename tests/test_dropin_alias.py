"""``import rlm`` under the alias: every module, one identity per class, child processes too.

Each check runs in a fresh interpreter: the alias changes ``sys.modules``, ``sys.meta_path`` and
``$PYTHONPATH``, which must not leak into this test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlm_compat
from rlm_compat import errors
from rlm_compat.dropin import AliasFinder, install_alias

ROOT = Path(rlm_compat.__file__).resolve().parent.parent


def _run(source: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    environment.pop("RLM_COMPAT_ALIAS_SHIM", None)
    environment.update(env or {})
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


ERROR_CLASSES = sorted(name for name in errors.__all__ if isinstance(getattr(errors, name), type))


@pytest.mark.parametrize("api", ["2fb46cc", "0.5"])
def test_every_error_class_has_one_identity_under_the_alias(api: str) -> None:
    _run(
        f"""
        import rlm_compat.dropin
        rlm_compat.dropin.install_alias()
        import rlm.errors, rlm.core, rlm.repl
        from rlm.errors import *
        for name in {ERROR_CLASSES!r}:
            cls = getattr(rlm.errors, name)
            assert cls is getattr(__import__("rlm_compat.errors").errors, name), name
            if hasattr(rlm, name):
                assert getattr(rlm, name) is cls, name
        assert rlm.core.MaxIterationsError is rlm.MaxIterationsError is rlm.errors.MaxIterationsError
        assert rlm.repl.REPLError is rlm.REPLError
        assert rlm.repl.REPLTimeoutError is rlm.REPLTimeoutError
        assert rlm.repl.WorkerResourceLimits is rlm.WorkerResourceLimits
        try:
            raise rlm.core.MaxIterationsError("x")
        except rlm.errors.RLMError:
            pass
        """,
        env={"RLM_COMPAT_API": api},
    )


def test_every_module_of_the_package_is_reachable_as_the_same_object() -> None:
    done = _run(
        """
        import importlib, pkgutil, sys
        import rlm_compat, rlm_compat.dropin
        rlm_compat.dropin.install_alias()
        names = sorted(m.name for m in pkgutil.walk_packages(rlm_compat.__path__, "rlm_compat."))
        for real in names:
            if real.endswith(("__main__", "_dropin_plugin")) or ".conformance.inputs." in real:
                continue
            alias = "rlm" + real[len("rlm_compat"):]
            assert importlib.import_module(alias) is importlib.import_module(real), alias
        print(len(names))
        """
    )
    assert int(done.stdout) > 40


def test_every_module_of_the_release_is_answered() -> None:
    """Each module of recursive-llm 0.5.0 (rlm, budget, core, errors, parser, prompts, repl,
    results, stats, types) imports with the names 0.5.0 exports; the two it has that rlm_compat
    does not provide say why."""
    _run(
        """
        import rlm_compat.dropin
        rlm_compat.dropin.install_alias(api="0.5")
        import rlm
        assert rlm.budget.RunBudget is rlm.RunBudget and rlm.results.RunResult is rlm.RunResult
        assert rlm.stats.UsageTracker.__module__ == "rlm_compat.record.usage"
        import rlm.budget, rlm.core, rlm.errors, rlm.parser, rlm.prompts, rlm.repl
        import rlm.results, rlm.stats, rlm.types
        from rlm.results import RESULT_SCHEMA_VERSION, CompletionResult, FailedCompletionResult
        from rlm.results import RunResult, TrajectoryEvent
        assert (CompletionResult, FailedCompletionResult, TrajectoryEvent) == (
            rlm.CompletionResult, rlm.FailedCompletionResult, rlm.TrajectoryEvent)
        assert RESULT_SCHEMA_VERSION == 1 and rlm.BudgetExceededError.abort_repl is True
        from rlm.budget import RunBudget
        from rlm.stats import UsageTracker
        from rlm.types import Message, RLMConfig, REPLEnvironment
        assert rlm.prompts.build_system_prompt(5, 0, 2, version="0.5.0").endswith("max_depth: 2. "
            "recursive_llm creates a child RLM.")
        for name, words in (("codex", "Codex"), ("run_state", "last_run")):
            try:
                __import__("rlm." + name)
            except ModuleNotFoundError as exc:
                assert exc.name == "rlm." + name and words in str(exc), exc
            else:
                raise AssertionError(name)
        """
    )


def test_alias_is_lazy_and_keeps_earlier_import_hooks_in_charge() -> None:
    _run(
        """
        import sys
        class Refuse:
            def find_spec(self, fullname, path=None, target=None):
                if fullname == "rlm.core":
                    raise AssertionError("refused by the program's own hook")
        sys.meta_path.insert(0, Refuse())
        import rlm_compat.dropin
        rlm_compat.dropin.install_alias()
        import rlm.repl
        assert "rlm_compat.core" not in sys.modules and "litellm" not in sys.modules
        try:
            import rlm.core
        except AssertionError as exc:
            assert "refused" in str(exc)
        else:
            raise SystemExit("a hook in front of the alias was bypassed")
        try:
            import rlm.no_such_module
        except ModuleNotFoundError as exc:
            assert exc.name == "rlm.no_such_module", exc.name
        """
    )


def test_a_second_copy_imported_before_the_alias_is_replaced() -> None:
    _run(
        """
        import importlib.util, sys, rlm_compat
        spec = importlib.util.spec_from_file_location("rlm.errors", rlm_compat.errors.__file__)
        sys.modules["rlm.errors"] = importlib.util.module_from_spec(spec)
        import rlm_compat.dropin
        rlm_compat.dropin.install_alias()
        import rlm.errors
        assert rlm.errors is rlm_compat.errors
        """
    )


def test_child_processes_of_the_aliased_program_import_rlm() -> None:
    done = _run(
        """
        import subprocess, sys
        import rlm_compat.dropin
        rlm_compat.dropin.install_alias()
        child = subprocess.run(
            [sys.executable, "-c",
             "import rlm, rlm.errors, sys; assert rlm.errors.RLMError is rlm.RLMError; "
             "import subprocess; print(rlm.__name__, subprocess.run([sys.executable, '-c', "
             "'import rlm.repl; print(rlm.repl.__name__)'], capture_output=True, text=True).stdout.strip())"],
            capture_output=True, text=True,
        )
        assert child.returncode == 0, child.stderr
        print(child.stdout.strip())
        """
    )
    assert done.stdout.split() == ["rlm_compat", "rlm_compat.repl"]


def test_spawned_worker_with_main_module_imports_rlm(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing
            import rlm_compat.dropin
            rlm_compat.dropin.install_alias()
            import rlm

            def probe(queue):
                import rlm.errors
                queue.put(rlm.errors.__name__)

            if __name__ == "__main__":
                ctx = multiprocessing.get_context("spawn")
                queue = ctx.Queue()
                process = ctx.Process(target=probe, args=(queue,))
                process.start()
                print(queue.get(timeout=60))
                process.join()
                assert process.exitcode == 0
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RLM_COMPAT_ALIAS_SHIM", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "rlm_compat.errors"


def test_shim_directory_is_removed_when_the_program_exits() -> None:
    done = _run(
        """
        import os, rlm_compat.dropin
        rlm_compat.dropin.install_alias()
        print(os.environ["RLM_COMPAT_ALIAS_SHIM"])
        """
    )
    shim = Path(done.stdout.strip())
    assert shim.name.startswith("rlm_compat-alias-")
    assert not shim.exists()


def test_api_preset_swaps_the_parser_module() -> None:
    _run(
        """
        import rlm_compat.dropin
        rlm_compat.dropin.install_alias()
        import rlm.parser
        assert rlm.parser.is_final('print("x")\\nFINAL("a")') is False
        assert rlm.parser.extract_final('FINAL("a \\\\"b\\\\"")') == 'a "b"'
        """,
        env={"RLM_COMPAT_API": "0.5"},
    )


def test_alias_name_is_checked() -> None:
    with pytest.raises(errors.ConfigurationError, match="identifier"):
        install_alias("not a name")
    with pytest.raises(errors.ConfigurationError):
        install_alias("rlm_compat")


def test_finder_maps_only_its_own_names() -> None:
    finder = AliasFinder("rlm", {"parser": "parser_v050"})
    assert finder.real_name("rlm") == "rlm_compat"
    assert finder.real_name("rlm.core") == "rlm_compat.core"
    assert finder.real_name("rlm.parser") == "rlm_compat.parser_v050"
    assert finder.real_name("rlmx") is None
    assert finder.real_name("other.rlm") is None
