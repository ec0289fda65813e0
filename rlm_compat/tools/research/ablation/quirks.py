"""The cost of each upstream quirk on real model code: recorded steps replayed under ablations.

Every step of the given trajectories (ours, ``rlms``' or dspy.RLM's; see
:mod:`rlm_compat.tools.replay.foreign`) is replayed (:func:`rlm_compat.tools.replay.replayer.replay`) under
``fixed``, ``upstream``, each ``upstream-without:<q>`` and each ``fixed-with:<q>``, and compared
with ``fixed``:

- a step **errors** under a profile when its new observation is a failure (the REPL raised: the
  loop would have shown ``Error: ...``);
- a step **breaks** under a profile when it errors there, or is never reached there (a child RLM
  its parent's failing code no longer starts), while under ``fixed`` it runs without error;
- a quirk ``q`` **costs** the steps that break under ``upstream`` but not under
  ``upstream-without:q``: the ones that turning ``q`` off alone repairs. Several quirks can share
  a step (it needs both off), so the costs need not add up to upstream's total;
- ``alone`` is how many steps break under ``fixed-with:q``: the quirk switched on by itself.

Model code is replayed with the recorded sub-call answers, so no model is called. Quirks of the
loop rather than of the REPL (``final_before_exec``, ``upstream_parser``) and of where code runs
(``inline_by_default``, with the isolation fixed for the whole table) cost nothing here by
construction; the compare grid measures those.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ....profiles import QUIRKS
from ...formats.foreign_runs import load_run
from ...replay.replayer import ReplayReport, replay
from ...runs.steps import RecordedRun

__all__ = ["QuirkCost", "QuirkTable", "quirk_table"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class QuirkCost:
    """One row of the table: a quirk (or a preset) and the steps it breaks."""

    name: str
    profile: str
    errors: int
    """Steps that error under ``profile``."""
    broken: int
    """Steps that break under ``profile`` (error or unreached there, fine under fixed)."""
    repaired: int | None = None
    """For a quirk: steps broken under upstream that ``upstream-without:<quirk>`` no longer breaks."""
    alone: int | None = None
    """For a quirk: steps broken under ``fixed-with:<quirk>``."""


@dataclass(frozen=True)
class QuirkTable:
    """Per-quirk step costs over a set of trajectories, and how they were measured."""

    trajectories: tuple[str, ...]
    formats: tuple[str, ...]
    steps: int
    isolation: str
    context: str
    """How the context was given: ``given`` or ``empty``."""
    presets: tuple[QuirkCost, ...]
    quirks: tuple[QuirkCost, ...]
    """Most repairs first, then by name."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: how it was measured and every row."""
        return dataclasses.asdict(self)

    def markdown(self) -> str:
        """The table as markdown, with a header saying what was replayed and how."""
        upstream = next(c for c in self.presets if c.name == "upstream")
        share = f"{upstream.broken / self.steps:.0%}" if self.steps else "n/a"
        lines = [
            f"Quirk cost on {self.steps} recorded step(s) from {len(self.trajectories)} trajectory file(s) "
            f"({', '.join(sorted(set(self.formats)))}); isolation {self.isolation}, context {self.context}.",
            f"`upstream` breaks {upstream.broken} of {self.steps} step(s) ({share}) that run under `fixed`.",
            "",
            "| quirk | steps repaired when off in upstream | share of upstream's breaks "
            "| steps broken when on alone in fixed |",
            "|---|---:|---:|---:|",
        ]
        for cost in self.quirks:
            part = f"{(cost.repaired or 0) / upstream.broken:.0%}" if upstream.broken else "–"
            lines.append(f"| `{cost.name}` | {cost.repaired} | {part} | {cost.alone} |")
        lines += ["", "| profile | steps that error | steps broken |", "|---|---:|---:|"]
        lines += [f"| `{c.profile}` | {c.errors} | {c.broken} |" for c in self.presets]
        return "\n".join(lines)


def quirk_table(
    paths: Sequence[str | os.PathLike[str]],
    *,
    context: str | None = None,
    isolation: str = "inline",
    format: str | None = None,
    quirks: Sequence[str] = QUIRKS,
    progress: Progress | None = None,
) -> QuirkTable:
    """Replay every trajectory under the presets and each single-quirk ablation; the table.

    ``context``: the context every trajectory is replayed over; None replays over ``""`` (a
    trajectory keeps only its context's size, and public ones rarely come with theirs). Code that
    reads the context then sees an empty one under every profile alike, which changes what it
    prints but not which profile lets it run. TrajectoryError for an unusable file.
    """
    runs = [load_run(path, format) for path in paths]
    profiles = ["fixed", "upstream"]
    profiles += [f"upstream-without:{q}" for q in quirks] + [f"fixed-with:{q}" for q in quirks]
    failures: dict[str, set[tuple[int, int]]] = {}
    errors: dict[str, int] = {}
    for name in profiles:
        if progress is not None:
            progress(name)
        failures[name], errors[name] = set(), 0
        for index, run in enumerate(runs):
            report = _replay(run, name, isolation, context)
            errors[name] += sum(1 for o in report.outcomes if o.reached and o.error)
            failures[name] |= {(index, o.step.seq) for o in report.outcomes if o.error or not o.reached}
    fine = {(i, s.seq) for i, run in enumerate(runs) for s in run.steps} - failures["fixed"]

    def broken(name: str) -> set[tuple[int, int]]:
        return failures[name] & fine

    upstream = broken("upstream")
    presets = tuple(QuirkCost(n, n, errors[n], len(broken(n))) for n in ("fixed", "upstream"))
    costs = [
        QuirkCost(
            q,
            f"upstream-without:{q}",
            errors[f"upstream-without:{q}"],
            len(broken(f"upstream-without:{q}")),
            repaired=len(upstream - broken(f"upstream-without:{q}")),
            alone=len(broken(f"fixed-with:{q}")),
        )
        for q in quirks
    ]
    costs.sort(key=lambda c: (-(c.repaired or 0), -(c.alone or 0), c.name))
    return QuirkTable(
        trajectories=tuple(str(p) for p in paths),
        formats=tuple(run.format for run in runs),
        steps=sum(len(run.steps) for run in runs),
        isolation=isolation,
        context="given" if context is not None else "empty (the recorded one is unknown)",
        presets=presets,
        quirks=tuple(costs),
    )


def _replay(run: RecordedRun, profile: str, isolation: str, context: str | None) -> ReplayReport:
    return replay(run, profile=profile, isolation=isolation, context=context or "", same_context=False)
