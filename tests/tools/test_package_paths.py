"""Where the tools find files: package resources, a source checkout, or an option named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest
from locations import ROOT

from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.cli import main
from rlm_compat.tools.research.real_trajectories import real_corpus
from rlm_compat.tools.shared import package_paths


def test_the_package_and_this_checkout_are_found_without_counting_directories() -> None:
    assert package_paths.package_dir() == ROOT / "rlm_compat"
    assert package_paths.source_checkout("a test", "--x") == ROOT
    assert package_paths.shipped_data("_no_such_resource", "upstream_fixtures") == ROOT / "upstream_fixtures"
    assert package_paths.shipped_data("_x", "upstream_fixtures", marker="no-such-file") is None


def test_without_a_checkout_the_error_names_the_option_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(package_paths, "import_root", lambda: tmp_path)  # as installed from a wheel
    with pytest.raises(
        ToolUsageError, match=r"real corpus .* source checkout of rlm_compat: pass --corpus FILE"
    ):
        real_corpus.default_corpus()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\n', encoding="utf-8")
    with pytest.raises(ToolUsageError, match="pass --out DIR"):
        package_paths.source_checkout("recording", "--out DIR")


def test_oracle_is_a_cli_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["oracle", "--help"])
    assert exit_info.value.code == 0
    assert "record" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["oracle", "record"])  # --python is required
    assert exit_info.value.code == 2
