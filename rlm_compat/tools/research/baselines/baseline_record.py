"""What a baseline record says: its 2fb46cc rows, the memo's verdicts, outcomes compared.

Shared by the collector (:mod:`.baseline`) and the page (:mod:`.baseline_page`), which both read a
record the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .baseline_facts import Expect, Probe

PROFILES = ("upstream", "fixed")
PEERS = ("recursive-llm-0.5.0", "rlms-0.1.1")


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def upstream_keys(record: Mapping[str, Any]) -> list[str]:
    return [i["key"] for i in record["implementations"] if i["key"].startswith("2fb46cc@")]


def python_dependent(record: Mapping[str, Any]) -> set[str]:
    """Probe ids whose 2fb46cc outcome differs between the recorded Pythons."""
    keys = upstream_keys(record)
    return {
        probe["id"]
        for probe in record["probes"]
        if len({json.dumps(record["results"][k].get(probe["id"]), sort_keys=True) for k in keys}) > 1
    }


def _holds(expect: Expect, outcome: Mapping[str, Any]) -> bool:
    if "steps" in outcome:
        steps = outcome["steps"]
        if not steps:
            return False
        step = steps[expect.step] if -len(steps) <= expect.step < len(steps) else {}
        if expect.outcome == "hang":
            return bool(step.get("hang"))
        if expect.outcome == "output":
            return "output" in step and expect.contains in step["output"]
        if expect.outcome == "error":
            error = step.get("error")
            return error is not None and expect.contains in f"{error['type']}: {error['message']}"
        if expect.outcome == "env":
            return bool(step.get("env", {}).get(expect.name) == expect.value)
        return False
    if expect.outcome == "answer" and "answer" in outcome:
        wanted = expect.contains if expect.value is None and expect.contains else expect.value
        return bool(outcome["answer"] == wanted)
    return False


def verdicts(record: Mapping[str, Any], probe: Probe) -> dict[str, bool]:
    """Per 2fb46cc Python: whether the memo's expectation of ``probe`` holds as measured."""
    if probe.expect is None:
        return {}
    return {
        key.split("@", 1)[1]: _holds(probe.expect, record["results"][key].get(probe.id, {}))
        for key in upstream_keys(record)
    }


def upstream_for_profiles(record: Mapping[str, Any]) -> str | None:
    """The 2fb46cc row recorded on the Python rlm_compat ran on (else the first)."""
    keys = upstream_keys(record)
    python = next((i["python"] for i in record["implementations"] if i["key"] in PROFILES), "")
    wanted = f"2fb46cc@{minor(python)}"
    return wanted if wanted in keys else (keys[0] if keys else None)


_SILENT = "Code executed successfully (no output)"


def quiet(outcome: Any) -> Any:
    """A peer's view: a silent step's placeholder reads as empty output, a parser row as its answer."""
    if isinstance(outcome, dict) and "is_final" in outcome:
        return {"answer": outcome.get("answer")}
    if isinstance(outcome, dict) and "steps" in outcome:
        steps = [
            {**step, "output": ""} if step.get("output") == _SILENT else step for step in outcome["steps"]
        ]
        return {**outcome, "steps": steps}
    return outcome


def same(recorded: Any, ours: Any) -> bool:
    """Equal outcomes, an error of a subclass of the recorded type counting as the same error."""
    if isinstance(recorded, dict) and isinstance(ours, dict):
        if "type" in recorded and "message" in recorded and "type" in ours:
            return bool(
                recorded["message"] == ours.get("message")
                and (recorded["type"] == ours["type"] or recorded["type"] in ours.get("isa", ()))
            )
        return recorded.keys() == ours.keys() and all(same(recorded[k], ours[k]) for k in recorded)
    if isinstance(recorded, list) and isinstance(ours, list):
        return len(recorded) == len(ours) and all(same(a, b) for a, b in zip(recorded, ours, strict=True))
    return bool(recorded == ours)
