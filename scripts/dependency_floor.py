"""Print pip constraints pinning each dependency of this project to the lower bound of its range.

``.ci/run`` installs the package with these constraints (``pip install -c FILE -e '.[test]'``) to
test the oldest versions the ranges allow, beside the newest that a plain ``pip install`` gives.
Pinned: the runtime dependencies and every user-facing extra (``view``, ``research``, ``ray``,
...), the packages a user's program runs on. Not pinned: the tools of the ``test`` extra (pytest
and its plugins, linters); they run the tests, the user never imports them. Only direct
dependencies are pinned; what they pull in resolves as pip resolves it that day, so the run is what
a user who pinned our floors would get. A range without a lower bound is an error: every range
this project declares must have been tested.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(?:;\s*(.*))?$")
_FLOOR = re.compile(r">=\s*([0-9][0-9A-Za-z.]*)")

TOOLS_GROUP = "test"


def floors(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """``name==floor`` (with its environment marker) for every dependency of every group."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for name, group in project.get("optional-dependencies", {}).items():
        if name != TOOLS_GROUP:
            requirements.extend(group)
    pins: dict[str, str] = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        if match is None:
            raise SystemExit(f"cannot read requirement {requirement!r} in pyproject.toml")
        name, spec, marker = match.group(1).lower(), match.group(2), match.group(3)
        found = _FLOOR.search(spec)
        if found is None:
            raise SystemExit(f"{requirement!r} has no lower bound: give it the oldest version tested")
        pin = f"{name}=={found.group(1)}" + (f"; {marker}" if marker else "")
        previous = pins.setdefault(name, pin)
        if previous != pin:
            raise SystemExit(f"{name} has two different floors in pyproject.toml: {previous!r}, {pin!r}")
    return sorted(pins.values())


def main() -> int:
    sys.stdout.write("".join(pin + "\n" for pin in floors()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
