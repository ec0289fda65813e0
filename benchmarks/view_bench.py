"""How fast the trajectory view opens and scrolls, in the system's headless Chromium.

    python benchmarks/view_bench.py [--steps 1000 10000] [--repeat 3]

For each size a synthetic trajectory is written (the root runs ``--steps`` iterations, every 10th
makes an ``llm_query`` sub-call, one observation in twenty is 4,000 characters; it validates
against the trajectory schema), rendered with ``rlm-compat view``, and opened from ``file://``:

- render: seconds ``write_view`` takes (Pygments runs here, once per reply);
- open: from navigation to the page's script having built the tree (median of ``--repeat``);
- search: typing a string found only in the last step and revealing that step;
- scroll: the slowest of 40 one-screen scroll steps, each building the chunks that come into view
  (the frame gap a reader would feel).

Target (the HTML view issue): a 10,000-step trajectory opens within 2 s. PASS / MISS is printed,
never asserted. Needs Playwright and a system Chromium (``$RLM_COMPAT_CHROMIUM`` or on PATH).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import view_data  # noqa: E402  (tests/ holds the trajectory generator the tests use too)

from rlm_compat.tools.view import write_view  # noqa: E402

OPEN_TARGET = 2.0

_SCROLL = """async () => {
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  let worst = 0;
  for (let i = 0; i < 40; i++) {
    const t = performance.now();
    window.scrollBy(0, window.innerHeight);
    await frame();
    worst = Math.max(worst, performance.now() - t);
  }
  return worst;
}"""


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    executable = view_data.chromium_path()
    if executable is None:
        print("no system Chromium found (set RLM_COMPAT_CHROMIUM)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=view_data.launch_args())
        for steps in args.steps:
            jsonl = view_data.synthetic_trajectory(Path(tmp) / f"t{steps}.jsonl", steps)
            html = Path(tmp) / f"t{steps}.html"
            started = time.perf_counter()
            write_view([jsonl], html)
            render = time.perf_counter() - started
            opens, searches, scrolls = [], [], []
            for _ in range(args.repeat):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                started = time.perf_counter()
                page.goto(html.as_uri())
                page.wait_for_selector("body[data-ready='1']", state="attached")
                opens.append(time.perf_counter() - started)
                scrolls.append(page.evaluate(_SCROLL) / 1000)
                started = time.perf_counter()
                page.fill("#search", "LAST_STEP_MARKER")
                page.press("#search", "Enter")
                page.wait_for_selector(".step.hit")
                searches.append(time.perf_counter() - started)
                page.close()
            rows.append(
                (
                    steps,
                    html.stat().st_size / 1e6,
                    render,
                    statistics.median(opens),
                    statistics.median(searches),
                    max(scrolls),
                )
            )
        browser.close()
    print(
        f"{'steps':>7} {'MB':>6} {'render s':>9} {'open s':>7} {'search s':>9} {'worst scroll s':>15}  target"
    )
    for steps, size, render, opened, searched, scrolled in rows:
        verdict = (
            ""
            if steps < 10000
            else ("PASS" if opened <= OPEN_TARGET else "MISS") + f" (open <= {OPEN_TARGET} s)"
        )
        figures = f"{size:>6.1f} {render:>9.2f} {opened:>7.2f} {searched:>9.2f} {scrolled:>15.3f}"
        print(f"{steps:>7} {figures}  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
