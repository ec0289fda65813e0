"""The suite's own xdist scheduling (tests/xdist_plan.py): a file that defines a shared fixture
runs on one worker, so that fixture is built once per run, not once per worker."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from xdist_plan import defines_shared_fixture

TESTS = Path(__file__).resolve().parent


def test_files_with_shared_fixtures_are_found_from_their_source(tmp_path: Path) -> None:
    assert defines_shared_fixture(TESTS / "tools" / "conformance" / "test_conformance.py")
    assert not defines_shared_fixture(TESTS / "test_options.py")
    broken = tmp_path / "test_broken.py"
    broken.write_text("def (:\n")
    assert not defines_shared_fixture(broken)


# once_per_ci: it checks the test suite's own scheduler plugin (a nested pytest run), not the library
@pytest.mark.once_per_ci
def test_a_module_fixture_is_built_once_across_two_workers(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    builds = tmp_path / "builds.txt"
    (tmp_path / "conftest.py").write_text('pytest_plugins = ("xdist_plan",)\n')
    (tmp_path / "test_shared.py").write_text(
        textwrap.dedent(f"""
            import os, time
            import pytest

            @pytest.fixture(scope="module")
            def built():
                with open({str(builds)!r}, "a") as f:
                    f.write(f"{{os.getpid()}}\\n")

            @pytest.mark.parametrize("n", range(8))
            def test_uses_it(built, n):
                time.sleep(0.05)
        """)
    )
    (tmp_path / "test_other.py").write_text(
        "import time, pytest\n@pytest.mark.parametrize('n', range(8))\ndef test_alone(n):\n    time.sleep(0.05)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-n", "2",
         "--dist", "loadgroup", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "16 passed" in done.stdout
    assert len(builds.read_text().split()) == 1
