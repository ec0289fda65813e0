"""Implementations and quirks measured on real model code: the corpus in real_corpus/.

Every run of the corpus (code steps real models wrote, collected with provenance by
scripts/build_real_corpus.py) becomes one REPL case of the conformance protocol: its environment
reconstructed as each record says (the recorded context, or a placeholder text of the recorded
size; the question; the recorded input variables where the log has them, placeholder text for
those it does not hold), a prelude step defining
sub-call stand-ins, then the model's steps in their
recorded order, so a step sees what the run's earlier steps left. Any implementation the
protocol reaches runs the same cases (``--impl NAME=COMMAND`` adds a row), and each step is judged
against plain CPython running it (what the model expected):

* **as CPython**: CPython ran it without error, and so did the implementation, printing the same
  text (trailing whitespace and the "no output" placeholders aside);
* **miss**: CPython ran it, the implementation did not (an error, other output, a skip); the first
  miss of a run is classified from the error text, later ones in the same run are **cascades**
  (they may only lack what the first one failed to define);
* **runs what CPython refuses**: CPython failed the step, the implementation did not.

Per-quirk cost: each upstream quirk alone on in ``fixed`` (``fixed-with:Q``: the steps it breaks)
and alone off in ``upstream`` (``upstream-without:Q``: the steps it repairs), first misses and
cascades counted apart. The record written beside the page hashes its inputs (the corpus, the
sandbox and profile sources, this module), and
``tests/tools/research/test_real_trajectories.py`` fails when the page does not match the record or
the record is stale against them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ....profiles import QUIRKS
from ...shared.package_paths import import_root, package_dir, source_checkout
from ...shared.tooling_errors import ToolUsageError

__all__ = [
    "CORPUS_FILE",
    "DEFAULT_IMPLS",
    "Step",
    "classify",
    "corpus_cases",
    "default_corpus",
    "input_hashes",
    "load_corpus",
    "measure",
    "render",
    "write_chart",
]

CORPUS_FILE = "real_corpus/steps.jsonl"  # in a source checkout; the wheel does not ship the corpus
CHART = "real-trajectories.png"
DEFAULT_IMPLS = ("cpython", "fixed", "upstream")
REQUIRED = (
    "id",
    "trajectory",
    "index",
    "source",
    "commit",
    "path",
    "model",
    "licence",
    "environment",
    "code",
)
PRELUDE = """def llm_query(prompt, *more, **options):
    return "[sub-call stand-in]"

def llm_query_batched(prompts, *more, **options):
    return ["[sub-call stand-in]" for prompt in prompts]

def SUBMIT(*values, **fields):
    return None

def FINAL_VAR(name):
    return None

def FINAL(value):
    return None
"""
"""Sub-call and answer stand-ins, defined as code so every implementation gets the same ones (the
protocol's REPL cases carry data, not functions); run before a run's first step, not counted."""

PLACEHOLDER_CAP = 8_000
"""A placeholder context is at most this long: over text that is not what the code expects, a
model's regex such as ``(.*@click\\.command.*\n(?:.*\n)*)`` backtracks quadratically, and at the
recorded 338,103 characters one step would outlast every timeout in every implementation."""
_PLACEHOLDER_LINE = (
    "placeholder line {n}: the recorded run's context is not published; this text stands in for it\n"
)
_NO_OUTPUT = frozenset({"", "Code executed successfully (no output)", "No code to execute"})

CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("timeout", re.compile(r"timed out|[Tt]imeout")),
    ("import refused", re.compile(r"__import__ not found|import of .* is not allowed|ImportError")),
    ("`+=` (no in-place guard)", re.compile(r"_inplacevar_")),
    ("write guard", re.compile(r"_write_")),
    ("unpacking guard", re.compile(r"_unpack_sequence_|_iter_unpack_sequence_")),
    ("star-call guard", re.compile(r"_apply_")),
    ("class support", re.compile(r"__metaclass__")),
    ("restriction (sandbox policy)", re.compile(
        r"SecurityError|not allowed|not available in the sandbox|invalid variable name|restricted name"
        r"|reserved name|is not supported in the sandbox|cannot modify"
    )),
    ("missing builtin", re.compile(
        r"name '(getattr|dir|object|property|classmethod|staticmethod|vars|"
        r"globals|locals|type|super|isinstance|hasattr|iter|next)' is not defined"
    )),
    ("NameError (scoping)", re.compile(r"NameError|name '\w+' is not defined")),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Step:
    """One corpus record (see scripts/build_real_corpus.py for the fields)."""

    record: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def trajectory(self) -> str:
        return str(self.record["trajectory"])


def load_corpus(path: Path | None = None) -> list[Step]:
    """The corpus's steps in file order; ToolUsageError for a record without provenance."""
    steps = []
    for number, line in enumerate((path or default_corpus()).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        missing = [k for k in REQUIRED if k not in record]
        if missing:
            raise ToolUsageError(f"{path}: line {number}: a corpus step needs {', '.join(missing)}")
        steps.append(Step(record))
    return steps


def _context(environment: dict[str, Any]) -> str:
    spec = environment["context"]
    if spec.get("kind") == "recorded":
        return str(spec.get("text", ""))
    return _placeholder(int(spec.get("chars", 0)))


def _placeholder(size: int) -> str:
    chars = min(size, PLACEHOLDER_CAP)
    text, n = [], 0
    size = 0
    while size < chars:
        line = _PLACEHOLDER_LINE.format(n=n)
        text.append(line)
        size += len(line)
        n += 1
    return "".join(text)[:chars]


def corpus_cases(steps: Sequence[Step]) -> list[dict[str, Any]]:
    """One protocol REPL case per run: prelude, then the run's steps in order."""
    runs: dict[str, list[Step]] = {}
    for step in steps:
        runs.setdefault(step.trajectory, []).append(step)
    cases = []
    for trajectory, members in runs.items():
        members.sort(key=lambda s: int(s.record["index"]))
        environment = members[0].record["environment"]
        context = _context(environment)
        env: dict[str, Any] = {"context": context}
        for alias in environment.get("aliases", []):
            env[alias] = context
        if "question" in environment:
            env["question"] = environment["question"]
        for name, value in environment.get("variables", {}).items():
            env.setdefault(name, value)
        for name, size in environment.get("placeholders", {}).items():
            env.setdefault(name, _placeholder(int(size)))
        prelude = PRELUDE + "".join(
            f'\ndef {name}(*args, **kwargs):\n    return "[tool stand-in]"\n'
            for name in environment.get("stand_ins", [])
            if name.isidentifier()
        )
        cases.append({"id": trajectory, "steps": [prelude, *(s.record["code"] for s in members)], "env": env})
    return cases


def _mark_unstable(
    cases: Sequence[dict[str, Any]], first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> None:
    """Mark in ``first`` the steps whose CPython output differs between two runs (``random``, time,
    set order): for those only the outcome's kind (output or error) is compared."""
    for case, a, b in zip(cases, first, second, strict=True):
        unstable = [i for i in range(len(case["steps"])) if _outcome(a, i) != _outcome(b, i)]
        if unstable:
            a["unstable"] = unstable


def _outcome(result: dict[str, Any], index: int) -> dict[str, Any]:
    """What one implementation did with step ``index`` (0: the prelude) of a case."""
    if "skip" in result:
        return {"kind": "skip", "text": str(result["skip"])}
    if "failure" in result:
        return {"kind": "failure", "text": str(result["failure"])}
    steps = result.get("result", {}).get("steps", [])
    if index >= len(steps):
        return {"kind": "failure", "text": "no result for this step (the case stopped early)"}
    step = steps[index]
    if "error" in step:
        error = step["error"]
        return {"kind": "error", "text": f"{error.get('type', '')}: {error.get('message', '')}"}
    if "hang" in step:
        return {"kind": "error", "text": f"timed out: {step['hang']}"}
    output = str(step.get("output", ""))
    return {"kind": "output", "text": "" if output.strip() in _NO_OUTPUT else output.rstrip()}


def run_impl(spec: str, cases: Sequence[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
    """Every case's result from the implementation ``spec`` (a conformance ``--impl`` spec)."""
    from ...conformance.adapters import Adapter, ProfileAdapter
    from ...conformance.implementations import make_adapter

    adapter: Adapter
    if spec.startswith(("fixed-with:", "upstream-without:")):
        adapter = ProfileAdapter(spec, isolation=options.get("isolation"))
    else:
        adapter = make_adapter(spec, **options)
    try:
        adapter.start()
        return adapter.run_many("repl", list(cases))
    finally:
        adapter.stop()


def classify(error_text: str) -> str:
    """The failure class of an error text (see CLASSES), else ``other error``."""
    for name, pattern in CLASSES:
        if pattern.search(error_text):
            return name
    return "other error"


def _judge(
    steps: Sequence[Step],
    cases: Sequence[dict[str, Any]],
    reference: list[dict[str, Any]],
    got: list[dict[str, Any]],
) -> dict[str, Any]:
    """Per step: as CPython, a first miss (classified), a cascade, or runs a step CPython refuses."""
    by_id = {s.id: s for s in steps}
    rows: dict[str, Any] = {
        "cpython_ran": 0,
        "as_cpython": 0,
        "misses": {},
        "cascades": 0,
        "runs_refused": 0,
        "prelude_failed": 0,
        "examples": {},
        "missed_steps": [],
    }
    for case, ref, res in zip(cases, reference, got, strict=True):
        members = sorted(
            (s for s in by_id.values() if s.trajectory == case["id"]), key=lambda s: s.record["index"]
        )
        if _outcome(res, 0)["kind"] not in ("output",):
            rows["prelude_failed"] += 1
        missed = False
        for position, step in enumerate(members, 1):
            want, have = _outcome(ref, position), _outcome(res, position)
            if want["kind"] != "output":
                if have["kind"] == "output":
                    rows["runs_refused"] += 1
                continue
            rows["cpython_ran"] += 1
            if have == want or (position in ref.get("unstable", ()) and have["kind"] == "output"):
                rows["as_cpython"] += 1
                continue
            rows["missed_steps"].append(step.id)
            if missed:
                rows["cascades"] += 1
                continue
            missed = True
            if have["kind"] == "output":
                kind = "other output"
            elif have["kind"] in ("skip", "failure"):
                kind = f"not run ({have['kind']})"
            else:
                kind = classify(have["text"])
            rows["misses"][kind] = rows["misses"].get(kind, 0) + 1
            rows["examples"].setdefault(
                kind,
                {
                    "step": step.id,
                    "code": _short(step.record["code"], 300),
                    "got": _short(have["text"], 200),
                    # what an unstable step printed differs from run to run: the page stays stable
                    "cpython": (
                        "(differs between CPython runs)"
                        if position in ref.get("unstable", ())
                        else _short(want["text"], 120)
                    ),
                },
            )
    return rows


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def measure(
    steps: Sequence[Step],
    impls: Iterable[str] = DEFAULT_IMPLS,
    *,
    quirks: bool = True,
    corpus: Path | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The record the page is rendered from: per implementation and per quirk, on ``steps`` (read
    from ``corpus``, by default the checkout's, whose hash the record keeps)."""
    cases = corpus_cases(steps)
    reference = run_impl("cpython", cases, **options)
    _mark_unstable(cases, reference, run_impl("cpython", cases, **options))
    record: dict[str, Any] = {
        "corpus": _corpus_summary(steps),
        "implementations": {},
        "quirks": {},
    }
    for spec in impls:
        name = spec.partition("=")[0]
        got = reference if name == "cpython" else run_impl(spec, cases, **options)
        record["implementations"][name] = _judge(steps, cases, reference, got)
    if quirks:
        fixed = set(record["implementations"].get("fixed", {}).get("missed_steps", []))
        upstream = set(record["implementations"].get("upstream", {}).get("missed_steps", []))
        for quirk in QUIRKS:
            on = _judge(steps, cases, reference, run_impl(f"fixed-with:{quirk}", cases, **options))
            off = _judge(steps, cases, reference, run_impl(f"upstream-without:{quirk}", cases, **options))
            broken = set(on["missed_steps"]) - fixed
            repaired = upstream - set(off["missed_steps"])
            record["quirks"][quirk] = {
                "breaks_alone": len(broken),
                "breaks_first": sum(on["misses"].values())
                - sum(record["implementations"]["fixed"]["misses"].values()),
                "repairs_alone": len(repaired),
            }
    record["inputs"] = input_hashes(corpus)
    return record


def _corpus_summary(steps: Sequence[Step]) -> dict[str, Any]:
    sources: dict[str, dict[str, Any]] = {}
    for step in steps:
        entry = sources.setdefault(
            step.record["source"],
            {"steps": 0, "runs": set(), "models": set(), "licence": step.record["licence"]},
        )
        entry["steps"] += 1
        entry["runs"].add(step.trajectory)
        entry["models"].add(step.record["model"])
    return {
        "steps": len(steps),
        "runs": len({s.trajectory for s in steps}),
        "models": sorted({s.record["model"] for s in steps}),
        "sources": {
            name: {
                "steps": e["steps"],
                "runs": len(e["runs"]),
                "models": sorted(e["models"]),
                "licence": e["licence"],
            }
            for name, e in sorted(sources.items())
        },
    }


def default_corpus() -> Path:
    """The source checkout's corpus (a :class:`ToolUsageError` saying to pass ``--corpus`` without one)."""
    return source_checkout(f"the real corpus ({CORPUS_FILE})", "--corpus FILE") / CORPUS_FILE


def input_hashes(corpus: Path | None = None) -> dict[str, str]:
    """sha256 of what the numbers depend on: the corpus (``corpus``, by default the checkout's), the
    sandbox and profiles, this module; keyed by path in a source checkout."""
    out = {CORPUS_FILE: hashlib.sha256((corpus or default_corpus()).read_bytes()).hexdigest()}
    package = package_dir()
    files = [Path(__file__), package / "profiles.py", package / "repl.py"]
    files += sorted((package / "sandbox").rglob("*.py"))
    files += [package / "tools" / "conformance" / "reference.py"]
    for path in files:
        out[str(path.resolve().relative_to(import_root().resolve()))] = hashlib.sha256(
            path.read_bytes()
        ).hexdigest()
    return out


def render(record: dict[str, Any]) -> str:
    """docs/research/real-trajectories.md from its record."""
    corpus, impls = record["corpus"], record["implementations"]
    lines = [*_corpus_lines(corpus), *_implementation_lines(impls), *_failure_lines(impls)]
    lines += [*_quirk_lines(record["quirks"]), *_limits_lines(corpus)]
    return "\n".join(lines)


def _corpus_lines(corpus: dict[str, Any]) -> list[str]:
    """The title, the command, and the corpus by source."""
    lines = [
        "# Real trajectories: the implementations and the upstream quirks on code real models wrote",
        "",
        "Generated by one command (each peer in its own interpreter; `NAME=COMMAND` adds any",
        "implementation speaking [the protocol](../protocol.md) as another row):",
        "",
        "```sh",
        "rlm-compat real-corpus --impl ysz-2fb46cc=PYTHON --upstream CHECKOUT \\",
        "  --impl recursive-llm-0.5.0=PYTHON --impl rlms-0.1.1=PYTHON \\",
        "  --out docs/research/real-trajectories.md",
        "```",
        "",
        "from `real_corpus/steps.jsonl` (rebuilt by `python scripts/build_real_corpus.py SOURCES_DIR`;",
        "sources, commits, licences and models in `real_corpus/SOURCES.json`). The record with the hashes",
        "of its inputs is `docs/research/real-trajectories.json`;",
        "`tests/tools/research/test_real_trajectories.py` fails when this page does not match it or it is",
        "stale against the corpus, the sandbox or this code.",
        "After a change to the sandbox alone, `rlm-compat real-corpus --keep-rows --out",
        "docs/research/real-trajectories.md` reruns CPython, both profiles and the quirks and keeps the",
        "peers' rows (they do not run rlm_compat's code).",
        "",
        "## The corpus",
        "",
        f"{corpus['steps']} code steps from {corpus['runs']} runs, {len(corpus['sources'])} sources, "
        f"{len(corpus['models'])} models. Each step is a JSON record with its source repository, commit, "
        "path, model, licence and how its environment is reconstructed (the recorded context, or a "
        "placeholder text of the recorded size; the recorded input variables where the log has them, "
        "placeholder text for those it does not; sub-call and tool stand-ins defined before the run's",
        "first step).",
        "",
        "| source | licence | runs | code steps | models |",
        "|---|---|---:|---:|---|",
    ]
    for name, entry in corpus["sources"].items():
        models = ", ".join(f"`{m}`" for m in entry["models"])
        lines.append(f"| {name} | {entry['licence']} | {entry['runs']} | {entry['steps']} | {models} |")
    return lines


def _implementation_lines(impls: dict[str, Any]) -> list[str]:
    """Per implementation: how many of the steps CPython runs it runs the same, and the chart."""
    lines = [
        "",
        "## Implementations against plain CPython",
        "",
        "A step counts when plain CPython runs it without error (what the model expected). *As CPython*:",
        "the implementation ran it too, printing the same text. A *first miss* is the first step of a run",
        "that did not; *cascades* are later misses of the same run. *Runs refused*: steps CPython fails",
        "that the implementation runs without error.",
        "",
        "| implementation | CPython runs | as CPython | share | first misses | cascades | runs refused |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in impls.items():
        ran = row["cpython_ran"]
        share = f"{100 * row['as_cpython'] / ran:.1f} %" if ran else "–"
        lines.append(
            f"| `{name}` | {ran} | {row['as_cpython']} | {share} | {sum(row['misses'].values())} | "
            f"{row['cascades']} | {row['runs_refused']} |"
        )
    lines += ["", f"![share of the steps CPython runs, per implementation]({CHART})", ""]
    return lines


def _failure_lines(impls: dict[str, Any]) -> list[str]:
    """Per implementation: its first misses by failure class, each with an example step."""
    lines = ["### Failure classes (first misses)", ""]
    for name, row in impls.items():
        if not row["misses"]:
            continue
        lines += [
            f"**`{name}`**",
            "",
            "| class | steps | example step | code (start) | what it got | CPython printed |",
            "|---|---:|---|---|---|---|",
        ]
        for kind, count in sorted(row["misses"].items(), key=lambda kv: (-kv[1], kv[0])):
            ex = row["examples"][kind]
            code = ex["code"].splitlines()[0] if ex["code"] else ""
            lines.append(
                f"| {kind} | {count} | `{ex['step']}` | `{_cell(code)}` | {_cell(ex['got'])} "
                f"| {_cell(ex['cpython'])} |"
            )
        lines.append("")
    return lines


def _quirk_lines(quirks: dict[str, Any]) -> list[str]:
    """What each upstream quirk alone breaks in `fixed` and repairs in `upstream` (if measured)."""
    if not quirks:
        return []
    lines = [
        "## Quirk cost on real code",
        "",
        "Each upstream quirk alone: on in `fixed` (`fixed-with:Q`), the steps it breaks that `fixed`",
        "runs as CPython (all of them, and the first misses among them); off in `upstream`",
        "(`upstream-without:Q`), the steps `upstream` misses that it then runs as CPython.",
        "",
        "| quirk | breaks alone (on in fixed) | of them first misses | repairs alone (off in upstream) |",
        "|---|---:|---:|---:|",
    ]
    for quirk, row in sorted(quirks.items(), key=lambda kv: (-kv[1]["breaks_alone"], kv[0])):
        lines.append(
            f"| `{quirk}` | {row['breaks_alone']} | {row['breaks_first']} | {row['repairs_alone']} |"
        )
    lines.append("")
    return lines


def _limits_lines(corpus: dict[str, Any]) -> list[str]:
    """What the measurement can claim, and whether the corpus reaches its size targets."""
    lines = [
        "## What this can and cannot claim",
        "",
        "The code is what real models wrote, re-executed step by step in each implementation with the",
        "model's replies held fixed: a step after a miss is a step the model would not have written had",
        "it seen the miss, which is why cascades are counted apart. Contexts that were not published are",
        f"placeholders of the recorded size (at most {PLACEHOLDER_CAP:,} characters), so outputs that depend",
        "on the context's text differ from the",
        "recording under every implementation alike; they are compared with CPython over the same",
        "placeholder, never with the recording. Tools a run had beyond the RLM's own functions are",
        "stand-ins returning a fixed text, and data a run read that its log does not hold (a document's",
        "blocks, a SPARQL endpoint's rows) is absent: steps needing them fail in CPython and are not",
        "counted. Steps whose output",
        "differs between two CPython runs (`random`, clocks) are compared by outcome kind only.",
        "Where a log holds the code but not what it printed (dspy.RLM's verbose log), the step is",
        "still judged against CPython, which needs no recording. Re-runs whose code repeats another",
        "run's exactly (a notebook re-executed against dspy's cache) are kept once.",
        "",
    ]
    short = [
        f"{have} {what} (target {want})"
        for have, want, what in (
            (corpus["steps"], 300, "code steps"),
            (len(corpus["sources"]), 5, "sources"),
            (len(corpus["models"]), 5, "models"),
        )
        if have < want
    ]
    if short:
        lines += [
            f"**The corpus is short of its size targets**: {', '.join(short)}. Shares on it are",
            "indicative, not a measurement of models at large.",
            "",
        ]
    return lines


def write_chart(record: dict[str, Any], path: Path) -> None:
    """A bar per implementation: steps as CPython, first misses and cascades (matplotlib, Agg)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ToolUsageError("the chart needs matplotlib: pip install 'rlm-compat[research]'") from None
    impls = list(record["implementations"].items())
    figure = Figure(figsize=(7.5, 0.5 * len(impls) + 1.4), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    names = [name for name, _ in impls]
    same = [row["as_cpython"] for _, row in impls]
    first = [sum(row["misses"].values()) for _, row in impls]
    cascades = [row["cascades"] for _, row in impls]
    axes.barh(names, same, color="#4c956c", label="as CPython")
    axes.barh(names, first, left=same, color="#d1495b", label="first miss")
    axes.barh(
        names,
        cascades,
        left=[a + b for a, b in zip(same, first, strict=True)],
        color="#edae49",
        label="cascade",
    )
    axes.invert_yaxis()
    axes.set_xlabel(f"steps plain CPython runs (of {record['corpus']['steps']} real code steps)")
    axes.legend(loc="lower right", fontsize="small")
    figure.savefig(path)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ⏎ ").replace("`", "'")
