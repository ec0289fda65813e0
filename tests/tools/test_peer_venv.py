"""``--setup``'s throwaway venvs: made once with pip from the registry, reused, failures said plainly."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.shared.peer_venv import peer_venv, setup_step


@pytest.mark.once_per_ci  # one venv and one pip install from PyPI (~10 s): not Python-specific
def test_a_peer_venv_is_made_once_and_then_reused(tmp_path: Path) -> None:
    said: list[str] = []
    python = peer_venv(tmp_path, "tiny", ["six==1.16.0"], said.append)
    assert python == str(tmp_path / "venv-tiny" / "bin" / "python")
    shown = subprocess.run(
        [python, "-c", "import six; print(six.__version__)"], capture_output=True, text=True
    )
    assert shown.stdout.strip() == "1.16.0"
    assert said == [f"tiny: python -m venv {tmp_path / 'venv-tiny'} && pip install six==1.16.0"]
    assert peer_venv(tmp_path, "tiny", ["six==1.16.0"], said.append) == python and len(said) == 1


def test_a_failed_setup_step_quotes_the_end_of_its_output(tmp_path: Path) -> None:
    with pytest.raises(ToolUsageError, match=r"--setup failed cloning it: .*(not|No such)"):
        setup_step(
            ["git", "clone", "-q", str(tmp_path / "missing.bundle"), str(tmp_path / "c")], "cloning it"
        )
