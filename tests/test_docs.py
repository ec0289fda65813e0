"""Docs that cannot go stale silently.

The API reference's build (docs/conf.py, warnings as errors, run by ``.ci/run``) checks every
cross-reference and link; these check what a build cannot see:

- no reference to this project's own issue tracker (``issue 24``, ``issues 3 and 7``): a reader
  of the docs, the README or the code cannot open it, so the text must say what it refers to. A
  peer project's issue is cited as a link (``https://github.com/owner/repo/issues/110``), which
  the pattern leaves alone;
- every environment switch a test reads to turn itself on is in the README's development section.
- the sizes of the two axes of behaviour in docs/architecture.md are the code's.
"""

from __future__ import annotations

import re
from pathlib import Path

from locations import ROOT

ISSUE_REFERENCE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def _texts() -> list[Path]:
    return sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "rlm_compat").rglob("*.py")])


def test_no_reference_to_the_private_tracker() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
        for path in _texts()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE_REFERENCE.search(line)
    ]
    assert not found, "say what is meant instead of the issue number:\n" + "\n".join(found)


def test_the_pattern_leaves_links_to_peers_trackers_alone() -> None:
    assert ISSUE_REFERENCE.search("measured in issue 24's corpus")
    assert ISSUE_REFERENCE.search("see Issues #3")
    assert not ISSUE_REFERENCE.search("https://github.com/alexzhang13/rlm/issues/110")
    assert not ISSUE_REFERENCE.search("the tissue 3 layers")


def test_every_test_switch_is_in_the_readme() -> None:
    switches = {
        name
        for path in (ROOT / "tests").rglob("*.py")
        for name in re.findall(r"\b(RLM_COMPAT_\w+_TESTS)\b", path.read_text(encoding="utf-8"))
    }
    assert switches >= {"RLM_COMPAT_DSPY_TESTS", "RLM_COMPAT_SERVE_LOAD_TESTS"}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    development = readme[readme.index("## Development") :]
    missing = sorted(s for s in switches | {"RLM_COMPAT_CI", "RLM_COMPAT_CHROMIUM"} if s not in development)
    assert not missing, f"README's development section does not name {missing}"


def test_the_axes_table_counts_what_the_code_has() -> None:
    """docs/architecture.md's table of the two axes of behaviour states their sizes."""
    import dataclasses

    from rlm_compat._releases import Release
    from rlm_compat.compat import ApiSemantics
    from rlm_compat.profiles import Profile

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    switches = len(dataclasses.fields(Profile)) - 1  # its name is not a switch
    members = [name for name in vars(Release) if not name.startswith("_")]
    assert f"| {switches} switches (+ `name`) |" in text
    assert f"| {len(dataclasses.fields(ApiSemantics))} fields; {len(members)} members |" in text
