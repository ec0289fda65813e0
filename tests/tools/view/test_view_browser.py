"""The HTML views in a real headless Chromium (the system's, driven by Playwright), opened from file://.

Outside CI a missing browser or Playwright skips these tests with the reason; under ``.ci/run``
(``RLM_COMPAT_CI=1``) it fails them. With ``RLM_COMPAT_VIEW_SCREENSHOTS=DIR`` the same run saves the
screenshots shown in docs/view.md (``scripts/view_screenshots.py`` regenerates them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import view_data
from locations import DATA

from rlm_compat.tools.cli import main

# The pages are our HTML and JavaScript in the system Chromium: nothing here varies with the
# Python version that wrote them (test_view.py checks the HTML itself on every Python).
pytestmark = pytest.mark.once_per_ci

SHOTS = os.environ.get("RLM_COMPAT_VIEW_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = None
    executable = view_data.chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "Playwright is not installed (pip install -e '.[test]')"
    if missing is None and executable is None:
        missing = "no system Chromium (apt-get install chromium, or set RLM_COMPAT_CHROMIUM)"
    if missing is not None:
        if os.environ.get(view_data.CI_ENV) == "1":
            pytest.fail(f"browser tests cannot run in CI: {missing}")
        pytest.skip(f"browser tests need a browser: {missing}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=view_data.launch_args())
        yield chromium
        chromium.close()


class Page:
    """A page with every dialog, page error and console error recorded (and dialogs dismissed)."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.events: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("dialog", self._dialog)
        self.page.on("pageerror", lambda exc: self.events.append(f"pageerror: {exc}"))
        self.page.on("console", lambda msg: self.events.append(f"console {msg.type}: {msg.text}"))
        self.open(path)

    def _dialog(self, dialog: Any) -> None:
        self.events.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def open(self, path: Path) -> None:
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", state="attached")

    def shot(self, name: str) -> None:
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.page.evaluate("window.scrollTo(0, 0)")
            self.page.screenshot(path=str(Path(SHOTS) / name), full_page=True)

    def close(self) -> None:
        self.page.close()


def view(inputs: list[Path], out: Path, *extra: str) -> Path:
    assert main(["view", *map(str, inputs), "-o", str(out), *extra]) == 0
    return out


def test_trajectory_view_tree_subcall_and_search(browser: Any, tmp_path: Path) -> None:
    html = view([view_data.tree_trajectory(tmp_path / "run.jsonl")], tmp_path / "run.html")
    page = Page(browser, html)
    p = page.page
    assert p.inner_text("#final-answer") == "needle-42"
    root = p.locator(".node").first
    assert "open" in (root.get_attribute("class") or "")
    assert "First I look at the context." in p.inner_text("#tree")
    p.locator("#node-rlm-1 > .node-body > details.system-prompt > summary").click()
    assert "Depth: 0" in p.locator("#node-rlm-1 > .node-body > details.system-prompt").inner_text()
    # below the root everything starts collapsed: the child's steps are not on screen
    assert not p.get_by_text('FINAL("child found needle-42")').is_visible()
    p.get_by_role("link", name="rlm-", exact=False).first.click()
    assert p.get_by_text('FINAL("child found needle-42")').is_visible()
    assert p.locator(".node.rlm.open").count() == 2  # the root and the child just followed
    p.locator("#node-rlm-1 > .node-head").focus()  # the keyboard folds and unfolds nodes too
    p.keyboard.press("Enter")
    assert p.locator("#node-rlm-1 > .node-head").get_attribute("aria-expanded") == "false"
    p.keyboard.press("Enter")
    assert p.locator("#node-rlm-1 > .node-head").get_attribute("aria-expanded") == "true"
    leaf_link = p.locator("a.child-link", has_text="leaf")
    leaf_link.click()
    assert p.locator(".node.leaf.open").get_by_text("leaf answer: summarise:").is_visible()
    page.shot("view-trajectory.png")
    p.fill("#search", "1 / 0")
    p.press("#search", "Enter")
    assert p.inner_text("#search-count") == "1 match"
    step = p.locator(".step.hit")
    assert step.is_visible()
    assert "ZeroDivisionError" in step.inner_text()
    p.fill("#search", "no such text anywhere")
    p.press("#search", "Enter")
    assert p.inner_text("#search-count") == "no match"
    assert page.events == []
    page.close()


def test_model_written_markup_runs_no_script(browser: Any, tmp_path: Path) -> None:
    html = view([view_data.xss_trajectory(tmp_path / "xss.jsonl")], tmp_path / "xss.html")
    page = Page(browser, html)
    p = page.page
    p.click("#expand-all")
    for button in p.locator(".fold-btn").all():
        button.click()
    p.fill("#search", "onerror")
    p.press("#search", "Enter")
    p.wait_for_timeout(200)
    assert p.evaluate("window.__xss") is None
    assert page.events == []
    assert p.evaluate("document.querySelectorAll('img').length") == 0
    # only the page's own two script blocks exist: the data and the nonce-tagged code
    assert p.evaluate("document.scripts.length") == 2
    text = p.inner_text("#tree")
    assert view_data.XSS_SCRIPT in text and view_data.XSS_IMG in text
    assert view_data.XSS_SCRIPT in p.inner_text("#query")
    assert view_data.XSS_IMG in p.inner_text("#final-answer")
    page.close()


def test_comparison_view_links_cells_to_trajectories(browser: Any, tmp_path: Path) -> None:
    directory = view_data.compare_dir(tmp_path / "grid")
    html = view([directory], tmp_path / "out" / "report.html")
    page = Page(browser, html)
    p = page.page
    assert "separate_scopes" in p.inner_text("#ablation")
    assert "+50 pt" in p.inner_text("#ablation")
    assert p.evaluate("document.querySelector('.charts img').naturalWidth") == 240
    rates = p.locator("#overview thead th", has_text="pass rate")
    rates.click()
    assert p.locator("#overview tbody tr td:first-child").all_inner_texts()[0] == "upstream"  # 50% first
    rates.click()
    assert p.locator("#overview tbody tr td:first-child").all_inner_texts()[-1] == "upstream"
    header = [c.strip() for c in p.locator("#matrix thead th").all_inner_texts()]
    column = header.index("upstream")
    row = p.locator("#matrix tbody tr", has_text="count-words")
    cell = row.locator("td").nth(column - 1)
    assert cell.inner_text().startswith("0/1")
    page.shot("view-compare.png")
    cell.locator("a.run-link").click()
    p.wait_for_selector("body[data-ready='1']", state="attached")
    assert p.url.startswith("file://") and "report_runs/run-" in p.url
    assert "upstream" in p.inner_text(".record")
    assert "failed" in p.inner_text(".record")
    assert p.inner_text("#final-answer") == "unknown"
    assert "NameError" in p.inner_text("#tree") or "not defined" in p.inner_text("#tree")
    p.get_by_role("link", name="back to the comparison").click()
    p.wait_for_selector("#ablation")
    assert page.events == []
    page.close()


def test_conformance_view_filters_and_side_by_side(browser: Any, tmp_path: Path) -> None:
    results = tmp_path / "conformance.json"
    code = main(["conformance", "--cases", "repl.scoping.lambda_*", "--json", str(results), "--quiet"])
    assert code == 0
    data = json.loads(results.read_text())
    statuses = {r["status"] for impl in data["implementations"] for r in impl["results"]}
    assert {"pass", "deviation"} <= statuses
    html = view([results], tmp_path / "conformance.html")
    page = Page(browser, html)
    p = page.page
    total = len({r["id"] for impl in data["implementations"] for r in impl["results"]})
    rows = p.locator("#matrix tbody tr.case:not(.hidden)")
    assert rows.count() == total
    p.locator("input[name=status][value=pass]").uncheck()
    deviating = {
        r["id"] for impl in data["implementations"] for r in impl["results"] if r["status"] != "pass"
    }
    assert rows.count() == len(deviating)
    p.locator("input[name=implementation][value='rlm_compat-fixed']").uncheck()
    assert rows.count() == 0  # the upstream profile passes every case
    p.locator("input[name=implementation][value='rlm_compat-fixed']").check()
    p.locator("input[name=profile][value=fixed]").uncheck()
    assert rows.count() == 0
    p.locator("input[name=profile][value=fixed]").check()
    p.fill("#case-filter", "lambda_body")
    assert rows.count() == 1
    rows.first.click()
    detail = p.locator("tr.detail")
    text = detail.inner_text().lower()  # labels are upper-cased by CSS
    assert "recorded upstream" in text and "actual outcome" in text
    assert "rlm_compat-fixed" in text and "deviation" in text
    recorded, *impls = detail.locator(".side > div").all_inner_texts()
    assert '"steps"' in recorded and "f = lambda v: v + k" in recorded  # the step's code, as code
    assert any('"output": "6"' in panel for panel in impls)  # what rlm_compat-fixed did
    page.shot("view-conformance.png")
    assert page.events == []
    page.close()


def replay_json(trajectory: Path, out: Path, *args: str) -> Path:
    """``rlm-compat replay TRAJECTORY --json ARGS > out`` (exit 0 or 1: identical or diverged)."""
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["replay", str(trajectory), "--json", *args]) in (0, 1)
    out.write_text(buffer.getvalue())
    return out


def test_replay_divergence_is_marked(browser: Any, tmp_path: Path) -> None:
    """A real run (litellm -> loopback server) recorded under fixed, replayed under upstream, viewed."""
    trajectory = view_data.replayable_trajectory(tmp_path / "run.jsonl")
    report = replay_json(
        trajectory, tmp_path / "d.json", "--profile", "upstream", "--context", view_data.REPLAY_CONTEXT
    )
    diverged = [s for s in json.loads(report.read_text())["steps"] if s["diverged"]]
    html = view([trajectory], tmp_path / "run.html", "--divergence", str(report))
    page = Page(browser, html)
    p = page.page
    banner = p.inner_text("#divergence-banner")
    assert "Replayed under profile upstream" in banner and f"{len(diverged)} of 5 steps diverge" in banner
    assert "fails under upstream; it ran in the recording" in banner
    p.click("#goto-divergence")
    first = p.locator("#step-rlm-1-0")
    assert "diverged" in (first.get_attribute("class") or "") and first.is_visible()
    text = first.inner_text()
    assert "replay diverged here" in text and "__import__ not found" in text  # the new observation
    assert "RECORDED OBSERVATION" in text.upper() and "REPLAYED UNDER UPSTREAM" in text.upper()
    # the next one is inside the child RLM, collapsed until the button opens it
    child = diverged[1]["node"]
    assert child != "rlm-1"
    p.click("#goto-divergence")
    marked = p.locator(f"#node-{child} .step.diverged").first
    assert marked.is_visible() and "_inplacevar_" in marked.inner_text()
    assert p.locator(f"#node-{child}").get_attribute("class") is not None
    assert "open" in (p.locator(f"#node-{child}").get_attribute("class") or "")
    p.click("#expand-all")
    assert p.locator(".step.diverged").count() == len(diverged)  # every divergence is marked
    page.shot("view-replay.png")
    assert page.events == []
    page.close()


def test_foreign_logs_render_and_their_replay_is_marked(browser: Any, tmp_path: Path) -> None:
    data = DATA / "replay"
    html = view([data / "rlms_nested.jsonl"], tmp_path / "nested.html")
    page = Page(browser, html)
    p = page.page
    assert p.inner_text("#final-answer") == "2"
    assert "rlms" in p.inner_text("#run-summary")
    child_code = p.locator("#node-root\\.1 pre.code").filter(has_text="re.findall('shipped', context)")
    assert child_code.count() == 0  # the child is collapsed: not even built
    p.locator("a.child-link", has_text="root.1").click()
    assert child_code.first.is_visible()
    p.locator("a.child-link", has_text="root.call-1").click()
    assert p.locator("#node-root\\.call-1").get_by_text("Say hi").first.is_visible()
    page.close()

    html = view([data / "dspy_prediction.json"], tmp_path / "dspy.html")
    page = Page(browser, html)
    p = page.page
    p.fill("#search", "totl")
    p.press("#search", "Enter")
    hit = p.locator(".step.hit")
    assert hit.is_visible() and "Oops." in hit.inner_text() and "[Error] NameError" in hit.inner_text()
    page.close()

    rlms = data / "rlms_run.jsonl"
    context = ["--context-file", str(data / "context.txt")]
    report = replay_json(rlms, tmp_path / "d.json", "--profile", "upstream-without:imports_refused", *context)
    page = Page(browser, view([rlms], tmp_path / "rlms.html", "--divergence", str(report)))
    p = page.page
    p.click("#goto-divergence")  # rlms' first divergence: the in-place counter of iteration 3
    marked = p.locator(".step.diverged").first
    assert marked.is_visible() and "iteration 3" in marked.inner_text()
    assert "shipped += 1" in marked.inner_text() and "_inplacevar_" in marked.inner_text()
    assert page.events == []
    page.close()


def test_long_trajectory_renders_lazily(browser: Any, tmp_path: Path) -> None:
    html = view([view_data.synthetic_trajectory(tmp_path / "long.jsonl", 2000)], tmp_path / "long.html")
    page = Page(browser, html)
    p = page.page
    assert p.locator(".step").count() < 200  # only what is near the screen is built
    p.fill("#search", "LAST_STEP_MARKER")
    p.press("#search", "Enter")
    hit = p.locator(".step.hit")
    assert hit.is_visible() and "iteration 2000" in hit.inner_text()
    assert p.locator(".step").count() < 400
    # long observations (4,000 characters here) are folded until asked for
    fold = p.locator(".fold", has=p.locator("pre.folded")).first.element_handle()
    assert len(fold.query_selector("pre").inner_text()) < 1600
    fold.query_selector("button.fold-btn").click()
    assert len(fold.query_selector("pre").inner_text()) == 4000
    assert fold.query_selector("button") is None
    assert page.events == []
    page.close()


def test_comparison_view_of_a_real_compare_grid(browser: Any, tmp_path: Path) -> None:
    """`rlm-compat compare` then `rlm-compat view` on its directory, as a user chains them."""
    grid = tmp_path / "grid"
    argv = ["compare", "--suite", "smoke", "--config", "fixed", "--config", "upstream"]
    assert main([*argv, "--model", "scripted", "--runs", "1", "--out", str(grid), "--no-progress"]) == 0
    records = [json.loads(line) for line in (grid / "runs.jsonl").read_text().splitlines()]
    failed = [r for r in records if not r["grade"]["passed"]]
    assert failed, "profile upstream fails some smoke task (the policy gives up on a quirk)"
    html = view([grid], tmp_path / "report.html")
    page = Page(browser, html)
    p = page.page
    assert p.locator("#overview tbody tr").count() == 2
    assert p.evaluate("document.querySelectorAll('.charts img').length") >= 1
    header = [c.strip() for c in p.locator("#matrix thead th").all_inner_texts()]
    row = p.locator("#matrix tbody tr", has_text=failed[0]["spec"]["task_id"])
    cell = row.locator("td").nth(header.index("upstream") - 1)
    assert cell.inner_text().startswith("0/1")
    cell.locator("a.run-link").click()
    p.wait_for_selector("body[data-ready='1']", state="attached")
    assert "report_runs/run-" in p.url and "upstream" in p.inner_text(".record")
    assert p.locator("#tree .node").count() >= 1
    assert page.events == []
    page.close()
