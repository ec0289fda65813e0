"""How long `import rlm_compat` takes, and proof that it imports no litellm (issue 2 target: < 150 ms).

Runs ``python -X importtime -c "import rlm_compat"`` several times in fresh interpreters and prints
one table: median cumulative import time of rlm_compat, of litellm for comparison, and whether any
litellm module appeared in the import list.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys


def _import_us(module: str) -> tuple[int, bool]:
    """Cumulative microseconds to import ``module``, and whether litellm was among the imports."""
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"}
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stderr
    total, litellm_seen = 0, False
    for line in err.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line.split("|"))
        if name == module:
            total = max(total, int(cumulative))
        if name == "litellm" or name.startswith("litellm."):
            litellm_seen = True
    return total, litellm_seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--with-litellm", action="store_true", help="also time `import litellm`")
    args = parser.parse_args()
    ours = [_import_us("rlm_compat") for _ in range(args.runs)]
    median_ms = statistics.median(t for t, _ in ours) / 1000
    leaked = any(seen for _, seen in ours)
    print("| measurement | value | target | result |")
    print("|---|---|---|---|")
    print(
        f"| import rlm_compat, median of {args.runs} (ms) | {median_ms:.1f} | < 150 | "
        f"{'PASS' if median_ms < 150 else 'MISS'} |"
    )
    verdict = "MISS" if leaked else "PASS"
    print(f"| litellm in the import list | {'yes' if leaked else 'no'} | no | {verdict} |")
    if args.with_litellm:
        theirs = statistics.median(_import_us("litellm")[0] for _ in range(3)) / 1000
        print(f"| import litellm, median of 3 (ms) | {theirs:.1f} | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
