"""How the live tests get their ysz/recursive-llm checkout (tests/upstream_checkout.py).

The network stand-in is the git bundle beside the project, handed over as the clone address
(``RLM_COMPAT_UPSTREAM_URL``), so the GitHub path is exercised without leaving the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import upstream_checkout
from upstream_checkout import ENV, HOW_ENV, URL_ENV, resolve, usable

BUNDLE = upstream_checkout.BUNDLE


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No checkout given, an empty cache, no bundle: only the clone address is left to try."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv(HOW_ENV, raising=False)
    monkeypatch.setattr(upstream_checkout, "_cache_root", lambda: tmp_path / "cache")
    monkeypatch.setattr(upstream_checkout, "BUNDLE", tmp_path / "no" / "recursive-llm.bundle")
    return tmp_path


def test_without_bundle_or_network_the_reason_is_given(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_ENV, str(isolated / "unreachable.git"))
    found = resolve()
    assert found.path is None
    assert "no bundle at" in found.how and "git clone" in found.how and "unreachable.git" in found.how
    assert list((isolated / "cache").iterdir()) == []  # a failed clone leaves nothing behind


@pytest.mark.skipif(not BUNDLE.is_file(), reason="no recursive-llm bundle beside the project")
def test_clone_from_the_address_is_pinned_and_cached(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(URL_ENV, str(BUNDLE))
    found = resolve()
    assert found.path == isolated / "cache" / "recursive-llm", found.how
    assert found.how.startswith("cloned from") and usable(found.path)
    monkeypatch.setenv(URL_ENV, str(isolated / "unreachable.git"))
    again = resolve()
    assert again.path == found.path and again.how.startswith("cached clone")
    (found.path / "README.md").write_text("changed")
    assert not usable(found.path)  # a modified clone is not trusted again


def test_given_path_and_empty_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(HOW_ENV, raising=False)
    monkeypatch.setenv(ENV, str(tmp_path))
    assert resolve().path == tmp_path
    monkeypatch.setenv(ENV, "")
    off = resolve()
    assert off.path is None and "empty" in off.how


def test_a_missing_checkout_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(upstream_checkout.CI_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no checkout"):
        upstream_checkout.missing("no checkout")
    monkeypatch.setenv(upstream_checkout.CI_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=r"no checkout .*must run, not skip"):
        upstream_checkout.missing("no checkout")
