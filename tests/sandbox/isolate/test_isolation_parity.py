"""Inline and process isolation give identical observable results on every conformance fixture.

Every recorded REPL and loop case of this Python runs through rlm_compat in both profiles, once in
the calling process and once in a worker process per session; outputs, errors, the caller's env
after each step (encoded as the recorder encodes it), answers and stats must be the same. This is
the conformance suite run in process mode, compared case by case with the inline run rather than
with upstream's recording (test_conformance.py does that for each profile's default isolation).
"""

from __future__ import annotations

import json
import platform
import re
from typing import Any

import pytest

from rlm_compat.tools.conformance.adapters import ProfileAdapter
from rlm_compat.tools.conformance.fixtures import FixtureSet, read_jsonl

# once_per_ci: what differs between the two isolations is the transport, the same code on every
# Python; test_conformance.py runs every fixture in process mode (each profile's default) against
# upstream's recording on every Python.
pytestmark = pytest.mark.once_per_ci

PYTHON = ".".join(platform.python_version().split(".")[:2])
_WHERE = re.compile(r" \(line \d+( of code block \d+)?\)$")


def _settled(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without what timing decides: how far a step got before its timeout (the env it
    left, the line it was on)."""
    steps = result.get("result", {}).get("steps")
    if not steps:
        return result
    settled = []
    for step in steps:
        error = step.get("error")
        if error and error.get("type") == "REPLTimeoutError":
            step = {"error": {**error, "message": _WHERE.sub("", error["message"])}}
        settled.append(step)
    return {"result": {**result["result"], "steps": settled}}


def _cases(kind: str) -> list[dict[str, Any]]:
    """The recorded inputs (cases that hung upstream carry a 1 s timeout: test_conformance_fixtures)."""
    path, _, _ = FixtureSet.open().select(kind, PYTHON)
    assert path is not None, f"no {kind} fixtures for Python {PYTHON}"
    return [line["input"] for line in read_jsonl(path)]


@pytest.mark.parametrize("profile", ["fixed", "upstream"])
@pytest.mark.parametrize("kind", ["repl", "loop"])
def test_inline_and_process_agree_on_every_fixture(profile: str, kind: str) -> None:
    inline = ProfileAdapter(profile, isolation="inline")
    process = ProfileAdapter(profile, isolation="process")
    cases = _cases(kind)
    differences = []
    for case in cases:
        a = inline.run(kind, case)
        b = process.run(kind, case)
        if _settled(a) != _settled(b):
            differences.append(
                f"{case['id']}:\n  inline:  {json.dumps(a, sort_keys=True)[:600]}\n"
                f"  process: {json.dumps(b, sort_keys=True)[:600]}"
            )
    assert len(cases) > (500 if kind == "repl" else 50)
    assert not differences, f"{len(differences)} of {len(cases)} differ:\n" + "\n".join(differences[:15])
