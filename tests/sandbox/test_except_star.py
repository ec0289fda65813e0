"""``except*`` is refused on CPython releases with the gh-128049 type confusion (CVE-2025-22153).

Both sides: the release predicate on each side of every fix, the running interpreter checked
against the real crash (the predicate must agree with what this CPython does), and the REPL's
answer with the predicate true and false.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlm_compat import REPLExecutor
from rlm_compat.errors import REPLSecurityError
from rlm_compat.sandbox.restrict import transformer
from rlm_compat.sandbox.restrict.cpython_bugs import except_star_is_safe
from rlm_compat.tools.conformance import oracle

POC = """
class Evil(BaseExceptionGroup):
    def split(self, *args):
        return "not a 2-tuple"
try:
    try:
        raise Evil("eg", [Exception()])
    except* Exception:
        pass
except TypeError as exc:
    print("TypeError", exc)
"""


@pytest.mark.parametrize(
    ("version", "safe"),
    [
        ((3, 10, 13), True),  # no except* at all
        ((3, 11, 7), False),
        ((3, 11, 14), False),  # the 3.11 line never got the fix
        ((3, 12, 8), False),
        ((3, 12, 9), True),
        ((3, 13, 1), False),
        ((3, 13, 2), True),
        ((3, 14, 0), True),
    ],
)
def test_release_predicate(version: tuple[int, int, int], safe: bool) -> None:
    assert except_star_is_safe(version) is safe


@pytest.mark.skipif(sys.version_info < (3, 11), reason="no except* before 3.11")
def test_predicate_agrees_with_this_interpreter() -> None:
    """The real bug on this CPython: a crash where the predicate says unsafe, a TypeError where safe."""
    run = subprocess.run([sys.executable, "-I", "-c", POC], capture_output=True, text=True, timeout=60)
    if except_star_is_safe():
        assert run.returncode == 0 and "split must return a 2-tuple" in run.stdout, run
    else:
        assert run.returncode != 0 and "TypeError" not in run.stdout, run


CODE = "try:\n    raise ExceptionGroup('g', [ValueError(1)])\nexcept* ValueError:\n    res = 'caught'"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="no except* before 3.11")
@pytest.mark.parametrize("safe", [False, True])
def test_fixed_profile_follows_the_predicate(monkeypatch: pytest.MonkeyPatch, safe: bool) -> None:
    monkeypatch.setattr(transformer, "except_star_is_safe", lambda: safe)
    env: dict[str, object] = {}
    code = f"{CODE}  # {safe}"  # a distinct text: compiled code is cached by source
    repl = REPLExecutor(isolation="inline")
    if safe:
        repl.execute(code, env)
        assert env["res"] == "caught"
    else:
        with pytest.raises(REPLSecurityError, match=r"try/except\* is not allowed .*gh-128049"):
            repl.execute(code, env)


def test_oracle_python_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 12, 8, "final", 0))
    assert oracle._python_matches("3.12<3.12.9", "3.12")
    assert not oracle._python_matches("3.12<3.12.9", "3.13")
    assert oracle._python_matches("3.12", "3.12")
    monkeypatch.setattr(sys, "version_info", (3, 12, 9, "final", 0))
    assert not oracle._python_matches("3.12<3.12.9", "3.12")
