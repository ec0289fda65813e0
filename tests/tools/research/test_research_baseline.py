"""docs/research/unofficial-baseline.md stays true: its rlm_compat rows are what the code does now.

The doc is rendered from a JSON record (``rlm-compat baseline``). Without upstream, these tests
re-run every snippet on rlm_compat's two profiles and compare with the record, re-render the
Markdown and compare with the checked-in file, and check that the snippets in the record are the
ones in ``rlm_compat/tools/research/baseline_facts.py``. A failure means: regenerate with the doc's
"Reproduce" command (``--render-only`` suffices when only the fixtures or the rendering changed;
a change of rlm_compat's behaviour or of a snippet needs the full run).
"""

from __future__ import annotations

import copy
import json
import platform
import shutil
from pathlib import Path
from typing import Any

import pytest
from locations import ROOT

from rlm_compat.tools.cli import main
from rlm_compat.tools.conformance.fixtures import default_fixtures_dir
from rlm_compat.tools.research.baselines.baseline import (
    PROFILES,
    QUICK_CODE,
    probe_definitions,
    python_dependent,
    render,
    run_profiles,
    run_quick_here,
    verdicts,
)
from rlm_compat.tools.research.baselines.baseline_facts import FACTS, all_probes

ROOT = ROOT
DOC = ROOT / "docs" / "research" / "unofficial-baseline.md"
RECORD = DOC.with_suffix(".json")
REGENERATE = "regenerate with the command in the doc's Reproduce block"


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORD.read_text(encoding="utf-8"))
    return data


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_the_record_holds_the_current_snippets(record: dict[str, Any]) -> None:
    assert record["probes"] == json.loads(json.dumps(probe_definitions())), (
        f"a snippet changed since the doc was generated; {REGENERATE}"
    )


def test_every_implementation_answered_every_snippet(record: dict[str, Any]) -> None:
    ids = {p.id for p in all_probes()}
    keys = [i["key"] for i in record["implementations"]]
    assert {"2fb46cc@3.11", "recursive-llm-0.5.0", "rlms-0.1.1", *PROFILES} <= set(keys)
    for key in keys:
        assert set(record["results"][key]) == ids, key
        assert not [o for o in record["results"][key].values() if "failure" in o], key


def test_the_doc_is_the_rendering_of_the_record(record: dict[str, Any]) -> None:
    assert DOC.read_text(encoding="utf-8") == render(record, default_fixtures_dir()), (
        "docs/research/unofficial-baseline.md is stale: run "
        "`rlm-compat baseline --render-only --out docs/research/unofficial-baseline.md`"
    )


def test_the_rlm_compat_rows_are_what_the_code_does_now(record: dict[str, Any]) -> None:
    recorded_python = next(i["python"] for i in record["implementations"] if i["key"] == "upstream")
    same_python = _minor(recorded_python) == _minor(platform.python_version())
    # on another Python, snippets whose 2fb46cc outcome depends on the version are not comparable
    skip = set() if same_python else python_dependent(record)
    probes = [p for p in all_probes() if p.id not in skip]
    now = json.loads(json.dumps(run_profiles(probes)))
    stale = [
        f"{profile} {probe.id}: recorded {record['results'][profile][probe.id]}, now {now[profile][probe.id]}"
        for profile in PROFILES
        for probe in probes
        if now[profile][probe.id] != record["results"][profile][probe.id]
    ]
    assert not stale, f"rlm_compat's behaviour changed; {REGENERATE}:\n" + "\n".join(stale)


def test_the_verdicts_follow_the_measurement(record: dict[str, Any]) -> None:
    """The doc's "memo holds" lines are computed: a different 2fb46cc outcome flips them."""
    probe = next(p for p in all_probes() if p.id == "import_re.refused")
    assert set(verdicts(record, probe).values()) == {True}
    altered = copy.deepcopy(record)
    for key in altered["results"]:
        if key.startswith("2fb46cc@"):
            altered["results"][key][probe.id] = {"steps": [{"output": "", "env": {}}]}
    assert set(verdicts(altered, probe).values()) == {False}
    assert "**Not as the memo says** on 2fb46cc" in render(altered, default_fixtures_dir())


def test_the_comprehension_verdict_depends_on_the_python(record: dict[str, Any]) -> None:
    """The memo's NG example: measured to fail on 3.10/3.11 only (PEP 709 inlines comprehensions)."""
    probe = next(p for p in all_probes() if p.id == "comprehension.expression_name_error")
    assert verdicts(record, probe) == {"3.10": True, "3.11": True, "3.12": False, "3.13": False}
    assert probe.id in python_dependent(record)


def test_escapes_show_only_reachable_or_blocked(record: dict[str, Any]) -> None:
    escapes = [p for fact in FACTS if fact.id == "escape" for p in fact.probes]
    assert escapes
    for probe in escapes:
        for key, outcomes in record["results"].items():
            outcome = outcomes[probe.id]
            if "skip" in outcome:
                continue
            for step in outcome["steps"]:
                assert step.get("output", "").split(" ")[0] in ("reachable", "blocked"), (key, step)
    assert record["results"]["upstream"]["escape.re_enum_os"]["steps"][0]["output"].startswith("blocked")
    assert record["results"]["fixed"]["escape.re_enum_os"]["steps"][0]["output"].startswith("blocked")


def test_no_machine_paths_are_committed() -> None:
    for path in (DOC, RECORD):
        text = path.read_text(encoding="utf-8")
        assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text, path


def test_render_only_rewrites_the_doc_from_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "baseline.md"
    shutil.copy(RECORD, out.with_suffix(".json"))
    assert main(["baseline", "--render-only", "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")
    assert "wrote" in capsys.readouterr().out


def test_bad_invocations_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "baseline.md"
    assert main(["baseline", "--out", str(out)]) == 1
    assert "give --upstream CHECKOUT and at least one --python" in capsys.readouterr().err
    assert main(["baseline", "--render-only", "--out", str(out)]) == 1
    assert "cannot read the record" in capsys.readouterr().err
    assert main(["baseline", "--upstream", str(tmp_path), "--python", "python3", "--out", str(out)]) == 1
    assert "is not a ysz/recursive-llm checkout" in capsys.readouterr().err


def test_the_one_script_outputs_are_what_the_code_does_now(record: dict[str, Any]) -> None:
    """The "In one script" section: the script really runs, and rlm_compat's output is current."""
    same_python = _minor(platform.python_version()) == record["quick"]["upstream"]["python"]
    # the comprehension line's outcome depends on the Python (PEP 709), the others do not
    varying = set() if same_python else {i for i, code in enumerate(QUICK_CODE) if " for " in code}
    for profile in PROFILES:
        now = run_quick_here(profile).splitlines()
        recorded = record["quick"][profile]["stdout"].splitlines()
        assert len(now) == len(recorded) == len(QUICK_CODE)
        stale = [
            (i, recorded[i], now[i]) for i in range(len(now)) if i not in varying and now[i] != recorded[i]
        ]
        assert not stale, f"{profile}: {stale}; {REGENERATE}"
    lines = record["quick"]["2fb46cc"]["stdout"].splitlines()
    assert lines[0] == "-> REPLError: Execution error: __import__ not found"
    assert len(lines) == len(QUICK_CODE)
