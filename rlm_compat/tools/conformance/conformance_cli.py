"""``rlm-compat record`` and ``rlm-compat conformance``: registered into the main CLI by :func:`register`."""

from __future__ import annotations

import argparse
import fnmatch
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ..shared.package_paths import source_checkout

__all__ = ["add_conformance_parser", "add_record_parser", "register"]

UPSTREAM_ENV = "RLM_COMPAT_UPSTREAM"


def register(subparsers: Any) -> None:
    """Add both subcommands to the main CLI's subparsers."""
    add_record_parser(subparsers)
    add_conformance_parser(subparsers)


def add_record_parser(subparsers: Any) -> None:
    """``record``: run the inputs against upstream checkouts and write the fixtures."""
    p = subparsers.add_parser(
        "record",
        help="record upstream fixtures from ysz/recursive-llm checkouts (maintainers)",
        description=(
            "Run the conformance inputs against ysz/recursive-llm checkouts under each given Python "
            "and write upstream_fixtures/ (JSON Lines + PROVENANCE.json). Checkouts are only read."
        ),
    )
    p.add_argument(
        "--upstream",
        action="append",
        type=Path,
        required=True,
        metavar="PATH",
        help="checkout of ysz/recursive-llm; give the 2fb46cc one, and the cc7a826 one "
        "if loop cases use prompt_version cc7a826 (repeatable)",
    )
    p.add_argument(
        "--python",
        action="append",
        default=None,
        metavar="PY",
        help="interpreter with RestrictedPython and litellm to record with (repeatable; default: this one)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="fixtures directory (default: the source tree's upstream_fixtures)",
    )
    p.add_argument(
        "--check", action="store_true", help="re-record into a temporary directory and fail on any difference"
    )
    p.add_argument(
        "--step-limit",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds a step may run before it is recorded as a hang (default 3)",
    )
    p.set_defaults(handler=_record)


def add_conformance_parser(subparsers: Any) -> None:
    """``conformance``: run the recorded fixtures against implementations."""
    from .implementations import REGISTRY

    known = ", ".join(name for name, entry in REGISTRY.items() if not entry.unavailable)
    p = subparsers.add_parser(
        "conformance",
        help="run the recorded upstream fixtures against rlm_compat (and other implementations)",
        description=(
            "Compare implementations with recorded ysz/recursive-llm 2fb46cc behaviour, case by "
            "case, and profile fixed also with recorded plain CPython (the second oracle: every "
            "difference a registered restriction). Default: both rlm_compat profiles. Needs no "
            "network and no API key. Exits 1 on any unexplained difference, unexpected pass or "
            "error of a gated implementation, against either oracle, and when any named "
            "implementation cannot start (gated or not)."
        ),
    )
    _add_implementation_options(p, known)
    _add_selection_options(p)
    _add_limit_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    p.add_argument(
        "--suggest-deviations",
        type=Path,
        default=None,
        metavar="DIR",
        help="after the run, attribute rlm_compat-fixed's unexplained differences to "
        "profile switches, save the attribution for this Python in DIR, and print "
        "deviations.toml entries merged over every Python attributed in DIR "
        "(maintainers: run once per recorded Python version)",
    )
    p.set_defaults(handler=_conformance)


def _add_implementation_options(p: argparse.ArgumentParser, known: str) -> None:
    """What runs, and the two oracles it is judged against."""
    p.add_argument(
        "--impl",
        action="append",
        default=None,
        metavar="NAME[=PYTHON|=COMMAND]",
        help=f"implementation to run (repeatable); known: {known}. Those in their own "
        "venv take the interpreter: rlms-0.1.1=../venvs/rlms011/bin/python. Any other NAME=COMMAND "
        "runs a command speaking the implementation protocol (docs/protocol.md), e.g. "
        "my-rlm='python my_adapter.py'",
    )
    p.add_argument(
        "--setup",
        action="store_true",
        help="create throwaway venvs for the PyPI peers named without an interpreter "
        "(recursive-llm-0.5.0, rlms-0.1.1, dspy-rlm: pip from PyPI; dspy-rlm's Deno and Pyodide "
        "from npm), reused from --setup-dir",
    )
    p.add_argument(
        "--setup-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep --setup's venvs here and reuse them next time (default: a temporary directory); "
        "the layout of rlm-compat compare --setup",
    )
    p.add_argument(
        "--upstream",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"2fb46cc checkout for ysz-2fb46cc (default ${UPSTREAM_ENV})",
    )
    p.add_argument(
        "--fixtures",
        type=Path,
        default=None,
        metavar="DIR",
        help="fixtures directory (default: the shipped fixtures)",
    )
    p.add_argument(
        "--reference",
        type=Path,
        default=None,
        metavar="DIR",
        help="CPython oracle: reference recordings and restrictions.toml that profile fixed is also "
        "gated against (default: the shipped reference_fixtures/, unless --fixtures is given)",
    )
    p.add_argument(
        "--no-cpython-oracle",
        action="store_true",
        help="judge profile fixed against the upstream fixtures only (skip the CPython oracle)",
    )


def _add_selection_options(p: argparse.ArgumentParser) -> None:
    """Which cases run, and where their results are written."""
    p.add_argument(
        "--kind",
        action="append",
        choices=("repl", "parser", "loop"),
        default=None,
        help="only these kinds of cases (repeatable)",
    )
    p.add_argument(
        "--cases",
        action="append",
        default=None,
        metavar="GLOB",
        help="only case ids matching this glob (repeatable), e.g. 'repl.scoping.*'",
    )
    p.add_argument(
        "--report", type=Path, default=None, metavar="OUT.md", help="write the markdown matrix here"
    )
    p.add_argument(
        "--json", type=Path, default=None, metavar="OUT.json", help="write every result as JSON here"
    )


def _add_limit_options(p: argparse.ArgumentParser) -> None:
    """How long a step or case may take, and where rlm_compat runs model code."""
    p.add_argument(
        "--step-limit",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds before a step of a driver-run implementation counts as a hang",
    )
    p.add_argument(
        "--case-limit",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a case of a protocol implementation may take before it is stopped and "
        "reported as errored (default 60)",
    )
    p.add_argument(
        "--isolation",
        choices=("inline", "process"),
        default=None,
        help="where rlm_compat's profiles run model code (default: each profile's own: "
        "fixed in a worker process, upstream inline)",
    )


def _record(args: argparse.Namespace) -> int:
    from .fixtures import default_fixtures_dir
    from .recorder import check, record

    pythons = args.python or [sys.executable]
    out = args.out
    if out is None:
        out = source_checkout("recording into upstream_fixtures/", "--out DIR") / "upstream_fixtures"

    def progress(message: str) -> None:
        print(f"record: {message}", file=sys.stderr, flush=True)

    if args.check:
        target = args.out or default_fixtures_dir()
        problems = check(args.upstream, pythons, target, step_limit=args.step_limit, progress=progress)
        for problem in problems:
            print(problem)
        print(
            f"record --check: {'identical' if not problems else f'{len(problems)} difference(s)'} ({target})"
        )
        return 1 if problems else 0
    provenance = record(args.upstream, pythons, out, step_limit=args.step_limit, progress=progress)
    for name, meta in provenance["fixtures"].items():
        print(f"{name}: {meta['cases']} cases")
    print(f"wrote {out}")
    return 0


def _conformance(args: argparse.Namespace) -> int:
    from .fixtures import FixtureSet
    from .implementations import parse_impl
    from .oracle import reference_fixture_set
    from .report import render_json, render_markdown, render_summary
    from .suite_runner import KIND_ORDER, run_conformance

    checkout = args.upstream or (Path(os.environ[UPSTREAM_ENV]) if os.environ.get(UPSTREAM_ENV) else None)
    entries = [parse_impl(spec) for spec in args.impl or ["rlm_compat-upstream", "rlm_compat-fixed"]]
    if args.setup:
        entries = _setup(entries, args.setup_dir)
    adapters = [
        entry.adapter(
            target,
            checkout=checkout,
            step_limit=args.step_limit,
            case_limit=args.case_limit,
            isolation=args.isolation,
        )
        for entry, target in entries
    ]
    fixtures = FixtureSet.open(args.fixtures)
    reference = None
    if not args.no_cpython_oracle and (args.reference is not None or args.fixtures is None):
        reference = reference_fixture_set(args.reference)
    patterns = args.cases or ["*"]
    report = run_conformance(
        adapters,
        fixtures,
        reference=reference,
        kinds=[k for k in KIND_ORDER if k in (args.kind or KIND_ORDER)],
        selector=lambda case_id: any(fnmatch.fnmatchcase(case_id, p) for p in patterns),
        progress_enabled=False if args.quiet else None,
    )
    command = "rlm-compat conformance " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    if args.report is not None:
        reproduce = _reproduce_steps([line for entry, _ in entries for line in entry.setup])
        args.report.write_text(
            render_markdown(report, command=command.strip(), reproduce=reproduce), encoding="utf-8"
        )
    if args.json is not None:
        args.json.write_text(render_json(report), encoding="utf-8")
    if not args.quiet:
        print(render_summary(report))
    if args.suggest_deviations is not None:
        _suggest(report, fixtures, args.suggest_deviations)
    return 1 if report.failed else 0


def _setup(entries: list[Any], directory: Path | None) -> list[Any]:
    """--setup: the peers' venvs under ``directory`` (a temporary one, removed at exit, if None)."""
    import atexit
    import shutil
    import tempfile

    from .peer_setup import setup_peers

    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="rlm-conformance-setup-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    return setup_peers(entries, directory, lambda m: print(f"setup: {m}", file=sys.stderr, flush=True))


def _suggest(report: Any, fixtures: Any, directory: Path) -> None:
    import json
    import platform

    from .attribution import Attribution, attribute_fixed, render_suggestions
    from .fixtures import read_jsonl

    python = ".".join(platform.python_version().split(".")[:2])
    lines = {}
    for kind in ("repl", "loop"):
        path, _, _ = fixtures.select(kind, python)
        if path is not None:
            lines.update({line["id"]: line for line in read_jsonl(path)})
    attribution = attribute_fixed(
        report, lines, python, progress=lambda m: print(f"attribute: {m}", file=sys.stderr)
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"attribution.py{python}.json").write_text(json.dumps(attribution.to_json()))
    merged = [
        Attribution.from_json(json.loads(p.read_text()))
        for p in sorted(directory.glob("attribution.py*.json"))
    ]
    print(render_suggestions(merged, fixtures.versions("repl")))


def _reproduce_steps(setup: list[str]) -> list[str]:
    """Shell lines that set up what a run used (the command itself follows them)."""
    return [
        "pip install -e '.[test]'",
        "# fixtures (maintainers; checkouts of ysz/recursive-llm at 2fb46cc and cc7a826):",
        "# rlm-compat record --upstream ../up/rlm-2fb46cc --upstream ../up/rlm-cc7a826 "
        "--python ../venvs/up310/bin/python --python ../venvs/up311/bin/python "
        "--python ../venvs/up312/bin/python --python ../venvs/up313/bin/python",
        *setup,
    ]
