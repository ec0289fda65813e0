"""Regenerate the screenshots in docs/view.md: they come from the browser tests' own run.

    python scripts/view_screenshots.py [--out docs/images]

Runs tests/tools/view/test_view_browser.py (one worker, the system's Chromium) with
``RLM_COMPAT_VIEW_SCREENSHOTS`` set, so each view is captured at the point where its test has
just checked what is on the screen. Fails if any browser test fails or skips.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("view-trajectory.png", "view-compare.png", "view-conformance.png", "view-replay.png")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    env = {
        **os.environ,
        "RLM_COMPAT_VIEW_SCREENSHOTS": str(args.out.resolve()),
        "RLM_COMPAT_CI": "1",  # a missing browser is an error here, not a skip
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "tests/tools/view/test_view_browser.py",
    ]
    status = subprocess.run(command, cwd=ROOT, env=env).returncode
    missing = [name for name in NAMES if not (args.out / name).is_file()]
    if status or missing:
        print(f"screenshots not regenerated (pytest exit {status}, missing {missing})", file=sys.stderr)
        return 1
    print("\n".join(str(args.out / name) for name in NAMES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
