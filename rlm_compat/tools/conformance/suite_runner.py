"""Run recorded fixtures against implementations and classify every result.

Statuses, per case and implementation::

    ``pass``            the result equals the recording;
    ``deviation``       it differs, and deviations.toml explains it (an *explained deviation*);
    ``unexplained``     it differs and nothing explains it (for peers, which the registry does not
                        cover, the same status is reported as ``differs`` and never gates the run);
    ``unexpected-pass`` it equals the recording although deviations.toml says it should differ;
    ``skipped``         the case does not apply (reason given);
    ``errored``         the implementation or its adapter failed to produce a result.

The run *fails* when a gated implementation (the rlm_compat profiles and the upstream checkout)
has any ``unexplained``, ``unexpected-pass`` or ``errored`` result.

Two oracles. Every implementation is judged against its own fixture set: ``upstream_fixtures/``
(what ysz/recursive-llm 2fb46cc did) for all but ``cpython-reference``, which reproduces
``reference_fixtures/`` (what plain CPython does), and ``dspy-rlm`` (plain Python in Pyodide),
compared with the same recordings semantically, as a peer. And profile fixed is gated against the CPython
oracle too: its REPL cases run again as ``rlm_compat-fixed vs CPython`` (see
:mod:`.oracle`), where ``deviation`` means a registered restriction of restrictions.toml
(``security`` or ``resource``, with the outcome fixed gives instead), and a difference no
restriction covers, a restricted case now equal to CPython, or another outcome than the one
registered fails the run.
"""

from __future__ import annotations

import platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import oracle as _oracle
from . import result_diff as _compare
from .adapters import Adapter
from .deviations import Registry
from .fixtures import DEVIATIONS, FixtureSet, read_jsonl

__all__ = [
    "FAILING",
    "STATUSES",
    "CaseResult",
    "ImplementationRun",
    "Progress",
    "RunReport",
    "run_conformance",
]

STATUSES = ("pass", "deviation", "unexplained", "unexpected-pass", "skipped", "errored")
FAILING = frozenset({"unexplained", "unexpected-pass", "errored"})
KIND_ORDER = ("repl", "parser", "loop")
_PARSER_BATCH = 500
_CASE_BATCH = 20


@dataclass
class CaseResult:
    """One case on one implementation."""

    id: str
    kind: str
    topic: str
    status: str
    detail: str = ""
    deviation: int | None = None
    deviation_kind: str | None = None
    actual: Any = None
    """What the implementation did, kept when it differs from the recording (the HTML view shows both)."""


@dataclass
class ImplementationRun:
    """Everything one implementation did in a run."""

    name: str
    gated: bool
    info: dict[str, Any] = field(default_factory=dict)
    fixtures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    results: list[CaseResult] = field(default_factory=list)
    seconds: float = 0.0
    oracle: str = "upstream"
    start_error: str = ""
    """Why it could not start (empty when it did): a failure of the run, gated or not, since the
    user named it and none of its cases ran."""

    def counts(self) -> dict[str, int]:
        """How many results have each status (all statuses present, zeros included)."""
        found = Counter(r.status for r in self.results)
        return {s: found.get(s, 0) for s in STATUSES}

    @property
    def failed(self) -> bool:
        return bool(self.start_error) or (self.gated and any(r.status in FAILING for r in self.results))


@dataclass
class RunReport:
    """A whole run: implementations in order, the registry used and its problems."""

    implementations: list[ImplementationRun]
    registry: Registry
    registry_problems: list[str]
    fixtures_root: str
    python: str = field(default_factory=platform.python_version)
    restrictions: list[_oracle.Restriction] = field(default_factory=list)
    restriction_problems: list[str] = field(default_factory=list)
    reference_root: str = ""

    @property
    def failed(self) -> bool:
        return (
            bool(self.registry_problems)
            or bool(self.restriction_problems)
            or any(i.failed for i in self.implementations)
        )


class Progress:
    """A plain progress bar on stderr; silent unless stderr is a terminal."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = max(total, 1)
        self.done = 0
        self._last = 0.0
        self.label = ""

    def advance(self, n: int = 1, label: str | None = None) -> None:
        self.done += n
        if label is not None:
            self.label = label
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            width = 30
            filled = int(width * min(self.done, self.total) / self.total)
            self.stream.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {self.label[:40]:<40}"
            )
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


class _Lines:
    """Fixture files read once per run, whatever the number of implementations."""

    def __init__(self, fixtures: FixtureSet) -> None:
        self.fixtures = fixtures
        self._cache: dict[Path, list[dict[str, Any]]] = {}

    def read(self, path: Path) -> list[dict[str, Any]]:
        if path not in self._cache:
            self._cache[path] = list(read_jsonl(path))
        return self._cache[path]

    def for_python(
        self, kind: str, python: str, run: ImplementationRun | None = None
    ) -> list[dict[str, Any]]:
        path, version, note = self.fixtures.select(kind, python)
        if run is not None and note:
            run.notes.append(note)
        if path is None:
            return []
        if run is not None:
            run.fixtures[kind] = path.name + (
                f" (recorded on {version})" if version and version != python else ""
            )
        return self.read(path)

    def all_ids(self, kinds: Sequence[str]) -> set[str]:
        return {
            line["id"]
            for kind in kinds
            for path in self.fixtures.files.get(kind, {}).values()
            for line in self.read(path)
        }


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def classify(
    adapter: Adapter,
    kind: str,
    line: dict[str, Any],
    outcome: dict[str, Any],
    registry: Registry,
    python: str,
) -> CaseResult:
    """The status of one outcome against its fixture line."""
    case_id, topic = line["id"], line["input"].get("topic", "")
    if "skip" in outcome:
        return CaseResult(case_id, kind, topic, "skipped", str(outcome["skip"]))
    if "failure" in outcome:
        return CaseResult(case_id, kind, topic, "errored", str(outcome["failure"]))
    if adapter.oracle == "cpython" and adapter.mode == "exact":  # the reference, on its own recording
        first = _oracle.first_difference(outcome["result"], line["expected"])
        if first is None:
            return CaseResult(case_id, kind, topic, "pass")
        index, mine, ref = first
        return CaseResult(case_id, kind, topic, "unexplained", f"step {index + 1}: {mine} / recorded {ref}")
    difference = _compare.compare(kind, line["expected"], outcome["result"], adapter.mode)
    entry = registry.lookup(case_id, adapter.profile, python) if adapter.profile else None
    if entry is None:
        if difference is None:
            return CaseResult(case_id, kind, topic, "pass")
        return CaseResult(case_id, kind, topic, "unexplained", difference, actual=outcome["result"])
    if difference is None:
        return CaseResult(
            case_id,
            kind,
            topic,
            "unexpected-pass",
            f"matches upstream, but deviation #{entry.number} ({entry.kind}) says it differs",
            entry.number,
            entry.kind,
        )
    if entry.expected is not None:
        mismatch = _compare.compare(kind, entry.expected, outcome["result"], "exact")
        if mismatch is not None:
            return CaseResult(
                case_id,
                kind,
                topic,
                "unexplained",
                f"differs from upstream and from deviation #{entry.number}'s expected result: {mismatch}",
                entry.number,
                entry.kind,
                outcome["result"],
            )
    return CaseResult(
        case_id, kind, topic, "deviation", difference, entry.number, entry.kind, outcome["result"]
    )


def _run_one(
    adapter: Adapter,
    lines: _Lines,
    registry: Registry,
    kinds: Sequence[str],
    selector: Callable[[str], bool],
    progress: Progress,
) -> ImplementationRun:
    run = ImplementationRun(adapter.name, adapter.gated, oracle=adapter.oracle)
    started = time.monotonic()
    try:
        run.info = adapter.start()
    except Exception as exc:
        run.start_error = f"{type(exc).__name__}: {exc}"
        run.notes.append(f"could not start: {run.start_error}")
        for kind in kinds:
            for line in lines.for_python(kind, _major_minor(platform.python_version())):
                if selector(line["id"]):
                    progress.advance(label=f"{adapter.name} {line['id']}")
                    run.results.append(
                        CaseResult(
                            line["id"],
                            kind,
                            line["input"].get("topic", ""),
                            "errored",
                            f"implementation did not start: {exc}",
                        )
                    )
        return run
    python = _major_minor(str(run.info.get("python", platform.python_version())))
    try:
        for kind in kinds:
            selected = [line for line in lines.for_python(kind, python, run) if selector(line["id"])]
            outcomes = _batched(adapter, kind, selected, progress)
            for line, outcome in zip(selected, outcomes, strict=True):
                run.results.append(classify(adapter, kind, line, outcome, registry, python))
    finally:
        adapter.stop()
        run.seconds = time.monotonic() - started
    return run


_HASH_SKIP = "output shows str-hash order; run with PYTHONHASHSEED=0 to compare it"


def _batched(
    adapter: Adapter, kind: str, lines: list[dict[str, Any]], progress: Progress
) -> Iterable[dict[str, Any]]:
    """Outcomes in order, asked for in batches (one progress step per batch)."""
    size = _PARSER_BATCH if kind == "parser" else _CASE_BATCH
    comparable = adapter.hash_seed_fixed
    for start in range(0, len(lines), size):
        chunk = lines[start : start + size]
        ask = [line for line in chunk if comparable or not line.get("hash_sensitive")]
        try:
            answers = iter(adapter.run_many(kind, [line["input"] for line in ask]))
        except Exception as exc:  # the implementation could not even be restarted
            failure = {"failure": f"{type(exc).__name__}: {exc}"}
            answers = iter([failure] * len(ask))
        progress.advance(len(chunk), label=f"{adapter.name} {kind} {chunk[-1]['id']}")
        for line in chunk:
            yield next(answers) if comparable or not line.get("hash_sensitive") else {"skip": _HASH_SKIP}


def _gate_fixed(
    adapter: Adapter,
    lines: _Lines,
    restrictions: Sequence[_oracle.Restriction],
    selector: Callable[[str], bool],
    progress: Progress,
) -> ImplementationRun:
    """Profile fixed's REPL cases against the CPython oracle (the module docstring says how)."""
    isolation = adapter.isolation
    run = ImplementationRun(f"{adapter.name} vs CPython", True, oracle="cpython")
    python = _major_minor(platform.python_version())
    started = time.monotonic()
    run.info = {"implementation": "rlm_compat", "version": adapter.info.get("version", "?"), "python": python}
    for line in lines.for_python("repl", python, run):
        if not selector(line["id"]):
            continue
        progress.advance(label=f"{run.name} {line['id']}")
        topic = line["input"].get("topic", "")
        try:
            ours = _oracle.run_fixed(line["input"], isolation)
        except Exception as exc:
            run.results.append(
                CaseResult(line["id"], "repl", topic, "errored", f"{type(exc).__name__}: {exc}")
            )
            continue
        verdict = _oracle.judge(line["id"], ours, line["expected"], restrictions, python)
        status = _VERDICT_STATUS[verdict.verdict]
        kind = restrictions[verdict.restriction - 1].reason if verdict.restriction else None
        run.results.append(
            CaseResult(line["id"], "repl", topic, status, verdict.detail, verdict.restriction, kind)
        )
    run.seconds = time.monotonic() - started
    return run


_VERDICT_STATUS = {
    "pass": "pass",
    "restricted": "deviation",
    "unexplained": "unexplained",
    "wrong-outcome": "unexplained",
    "unexpected-pass": "unexpected-pass",
}


def run_conformance(
    adapters: Sequence[Adapter],
    fixtures: FixtureSet,
    *,
    kinds: Sequence[str] = KIND_ORDER,
    selector: Callable[[str], bool] = lambda _: True,
    registry: Registry | None = None,
    reference: FixtureSet | None = None,
    restrictions: Sequence[_oracle.Restriction] | None = None,
    progress_stream: TextIO | None = None,
    progress_enabled: bool | None = None,
) -> RunReport:
    """Run every selected fixture case against every adapter, in order, each against its oracle.

    ``reference`` (a :func:`~.oracle.reference_fixture_set`) turns the CPython oracle on: profile
    fixed's REPL cases are then gated against it too, under ``restrictions`` (default: the
    registry beside the reference recordings). A ``cpython-reference`` adapter is judged against
    it whether given or not (the shipped recordings by default).
    """
    registry = registry if registry is not None else Registry.load(fixtures.root / DEVIATIONS)
    if reference is None and "repl" in kinds and any(a.oracle == "cpython" for a in adapters):
        reference = _oracle.reference_fixture_set()
    oracles = {"upstream": _Lines(fixtures)}
    gate_fixed: list[_oracle.Restriction] | None = None
    if reference is not None:
        oracles["cpython"] = _Lines(reference)
        if "repl" in kinds and any(a.profile == "fixed" for a in adapters):
            gate_fixed = list(
                restrictions
                if restrictions is not None
                else _oracle.load_restrictions(reference.root / "restrictions.toml")
            )
    here = _major_minor(platform.python_version())

    def selected(lines: _Lines, kind_list: Sequence[str]) -> int:
        return sum(1 for kind in kind_list for line in lines.for_python(kind, here) if selector(line["id"]))

    lines = oracles["upstream"]
    total = sum(selected(oracles[a.oracle], kinds) for a in adapters)
    if gate_fixed is not None:
        total += selected(oracles["cpython"], ["repl"]) * sum(1 for a in adapters if a.profile == "fixed")
    problems = registry.check_against(lines.all_ids(KIND_ORDER)) if set(kinds) == set(KIND_ORDER) else []
    progress = Progress(total, progress_stream, progress_enabled)
    runs: list[ImplementationRun] = []
    for adapter in adapters:
        lines_of = oracles[adapter.oracle]
        # the CPython oracle records REPL cases only: no note about parser / loop fixtures it never has
        own = kinds if adapter.oracle == "upstream" else [k for k in kinds if k in lines_of.fixtures.files]
        runs.append(_run_one(adapter, lines_of, registry, own, selector, progress))
        runs[-1].notes += [
            f"{kind} cases not run: {adapter.skip_reasons[kind]}"
            for kind in kinds
            if kind not in own and kind in adapter.skip_reasons
        ]
        if gate_fixed is not None and adapter.profile == "fixed":
            runs.append(_gate_fixed(adapter, oracles["cpython"], gate_fixed, selector, progress))
    progress.close()
    report = RunReport(runs, registry, problems, str(fixtures.root))
    if gate_fixed is not None:
        report.restrictions = gate_fixed
        report.reference_root = str(oracles["cpython"].fixtures.root)
        report.restriction_problems = _oracle.unused_patterns(
            gate_fixed, oracles["cpython"].all_ids(["repl"]), here
        )
    return report
