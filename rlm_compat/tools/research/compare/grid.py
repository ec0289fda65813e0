"""A comparison grid: which runs it has, how one run (cell) executes, and the log of finished runs.

Everything an executor needs to run a cell anywhere (this process, a Ray worker on another machine)
is in one picklable :class:`GridJob`: the suite, the policy factory and the model settings. A cell
returns its :class:`~rlm_compat.tools.research.base.RunRecord` plus the trajectory text, so the single
writer of the grid's directory is the process that started it, whichever engine ran the cell.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import re
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....clients import LLMClient
from ....errors import RLMError
from ....profiles import QUIRKS, Profile
from ...shared.tooling_errors import ToolError, ToolUsageError
from ..base import RunRecord, RunSpec, Suite, TaskInstance, TaskSpec, turn_graders
from .impls import IMPL_PREFIX, GridImplementation, TaskOutcome, run_driver_task
from .turns import (
    TurnSettings,
    graded_turns,
    rlm_compat_turns,
    run_turns,
    session_profile,
    task_extra,
    turns_record,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "SCRIPTED",
    "CellResult",
    "GridError",
    "GridJob",
    "PolicyFactory",
    "RunLog",
    "ablation_configs",
    "expand_configs",
    "plan",
    "run_cell",
    "trajectory_name",
]

SCRIPTED = "scripted"
"""The model name of a grid whose replies come from each task's deterministic policy."""

PolicyFactory = Callable[[TaskInstance, RunSpec], "LLMClient | None"]
"""``(task, spec) -> client``: the client of one cell; None means the RLM's litellm client."""


class GridError(ToolError):
    """The grid cannot run or resume as asked (unknown task, unreadable run log)."""


def ablation_configs() -> list[str]:
    """Each upstream quirk turned off alone from ``upstream``, then each turned on alone in ``fixed``."""
    upstream_on = [q for q in QUIRKS if Profile.upstream().quirks()[q]]
    return [f"upstream-without:{q}" for q in upstream_on] + [f"fixed-with:{q}" for q in upstream_on]


def expand_configs(configs: Sequence[str], *, ablation: bool = False) -> list[str]:
    """The grid's profile specs, validated, without duplicates, in the order given.

    ``ablation`` adds ``fixed`` and ``upstream`` (the two baselines the deltas are taken from) and
    every single-switch ablation. ``session:PROFILE`` asks a task's questions in one persistent
    session (:mod:`.turns`). A spec that is not a profile fails here, before any run starts.
    """
    wanted = list(configs)
    if ablation:
        wanted += ["fixed", "upstream", *ablation_configs()]
    if not wanted:
        raise ToolUsageError("give at least one --config (e.g. --config fixed --config upstream)")
    out: list[str] = []
    for spec in wanted:
        inner = session_profile(spec)[1]
        if not inner.startswith(IMPL_PREFIX):  # session:impl:NAME: checked against the --impl list
            Profile.named(inner)  # raises ConfigurationError naming the known switches
        if spec not in out:
            out.append(spec)
    return out


def plan(suite: Suite, configs: Sequence[str], model: str, runs: int) -> list[RunSpec]:
    """Every cell of the grid: task x config x run index, tasks in suite order."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ToolUsageError(f"runs must be an integer >= 1, not {runs!r}")
    if not model:
        raise ToolUsageError(f"model must be {SCRIPTED!r} or a litellm model name")
    tasks = list(suite.tasks())
    if not tasks:
        raise ToolUsageError(f"suite {suite.name!r} has no tasks: nothing to compare")
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ToolUsageError(f"suite {suite.name!r} repeats task ids {twice}: run ids would collide")
    return [
        RunSpec(suite=suite.name, task_id=task.task_id, config=config, model=model, run_index=index)
        for task in tasks
        for config in configs
        for index in range(runs)
    ]


def trajectory_name(run_id: str) -> str:
    """A file name for ``run_id``: readable, filesystem-safe, and unique (a hash of the full id)."""
    readable = re.sub(r"[^A-Za-z0-9._=-]+", "_", run_id.replace("/", "__"))
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:10]
    return f"{readable[:150]}-{digest}.jsonl"


@dataclasses.dataclass(frozen=True)
class CellResult:
    """What a cell sends back to the grid's writer: the record line, the trajectory text (a
    multi-question run's first turn), the raw log files of an implementation's run (name -> text,
    written under ``record["logs"]``) and the later turns' trajectories."""

    record: dict[str, Any]
    trajectory: str | None
    logs: dict[str, str] = dataclasses.field(default_factory=dict)
    more_trajectories: dict[str, str] = dataclasses.field(default_factory=dict)
    """A multi-question run's later turns: path (relative to the grid's directory) -> text."""


class GridJob:
    """The picklable description of a grid's runs (not of its cells, which are :class:`RunSpec`).

    ``policy`` makes each cell's client (the task's scripted policy for model ``scripted``; None
    for a litellm model, reached with ``api_base`` / ``api_key``; ``max_retries`` is the RLM's
    retry count for rate limits and transient provider errors). ``implementations`` are the
    ``impl:NAME`` configs' implementations by name; ``time_limit``: seconds one of their runs may
    take before it is killed and recorded as a hang. Built tasks are cached per
    process (a few at a time), so the configs of one task share one corpus build.
    """

    def __init__(
        self,
        suite: Suite,
        policy: PolicyFactory,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        max_iterations: int = 30,
        isolation: str | None = None,
        repl_timeout: float | None = 5,
        max_retries: int | None = None,
        cache_size: int = 8,
        implementations: Mapping[str, GridImplementation] | None = None,
        time_limit: float = 600.0,
    ) -> None:
        self.suite = suite
        self.implementations = dict(implementations or {})
        self.time_limit = time_limit
        self.policy = policy
        self.api_base = api_base
        self.api_key = api_key
        self.max_iterations = max_iterations
        self.isolation = isolation
        self.repl_timeout = repl_timeout
        self.max_retries = max_retries
        self.cache_size = cache_size
        self._specs: dict[str, TaskSpec] | None = None
        self._built: OrderedDict[str, TaskInstance] = OrderedDict()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_specs"], state["_built"] = None, OrderedDict()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def task_spec(self, task_id: str) -> TaskSpec:
        """The suite's task called ``task_id``."""
        if self._specs is None:
            self._specs = {t.task_id: t for t in self.suite.tasks()}
        try:
            return self._specs[task_id]
        except KeyError:
            raise GridError(
                f"suite {self.suite.name!r} (version {self.suite.version}) has no task {task_id!r}; "
                "a run log from another suite version cannot be resumed into this one"
            ) from None

    def task(self, task_id: str) -> TaskInstance:
        """The built task (cached: a 10 M-character corpus is built once per task, not per cell).

        Thread-safe, so cells build in worker threads while other cells' model calls go on.
        """
        with self._lock:
            if task_id in self._built:
                self._built.move_to_end(task_id)
                return self._built[task_id]
            built = self.task_spec(task_id).build()
            self._built[task_id] = built
            while len(self._built) > self.cache_size:
                self._built.popitem(last=False)
            return built


async def run_cell(job: GridJob, spec: RunSpec, trajectory_dir: Path | None = None) -> CellResult:
    """Run one cell: build its task, run the RLM under its profile, grade the answer.

    A task with several questions asks them one by one: a fresh RLM per question, or one
    persistent session for a ``session:PROFILE`` config (:mod:`.turns`). A run that fails (max
    iterations, a provider error) is a record with ``error_type`` and a failing grade, not an
    exception: a grid measures failures too. Trajectories are written to a scratch directory and
    returned as text, so the caller decides where they live.
    """
    if session_profile(spec.config)[1].startswith(IMPL_PREFIX):
        return await run_impl_cell(job, spec, trajectory_dir)
    task_spec = job.task_spec(spec.task_id)
    task = await asyncio.to_thread(job.task, spec.task_id)  # a big corpus must not stall the loop
    client = job.policy(task, spec)
    persistent, profile = session_profile(spec.config)
    settings = TurnSettings(
        spec.model,
        profile,
        job.api_base,
        job.api_key,
        job.max_iterations,
        job.isolation,
        job.repl_timeout,
        job.max_retries,
    )
    with tempfile.TemporaryDirectory(prefix="rlm-cell-", dir=trajectory_dir) as scratch:
        turns, errors, texts = await run_turns(
            settings, client, task, turn_graders(task_spec), Path(scratch), persistent=persistent
        )
    name = trajectory_name(spec.run_id)
    if len(turns) == 1:
        record = turns_record(spec, task, turns, errors, f"trajectories/{name}" if texts[0] else None)
        return CellResult(record.to_json(), texts[0])
    stem = name.removesuffix(".jsonl")
    paths = [f"trajectories/{stem}.turn{i + 1}.jsonl" if text else None for i, text in enumerate(texts)]
    turns = [dataclasses.replace(turn, trajectory=path) for turn, path in zip(turns, paths, strict=True)]
    record = turns_record(spec, task, turns, errors, paths[0])
    extra = {path: text for path, text in zip(paths[1:], texts[1:], strict=True) if path and text}
    return CellResult(record.to_json(), texts[0], more_trajectories=extra)


async def run_impl_cell(job: GridJob, spec: RunSpec, trajectory_dir: Path | None = None) -> CellResult:
    """Run one cell of implementation ``impl:NAME``: the task through that implementation's loop.

    Model ``scripted``: a :class:`~.endpoint.PolicyEndpoint` of its own serves the task's policy
    (variant = run index) and counts calls and tokens; else the implementation is given the
    model name, ``api_base`` and ``api_key``, and its own figures are recorded.
    """
    from .endpoint import SCRIPTED_ENDPOINT_MODEL, PolicyEndpoint

    persistent, config = session_profile(spec.config)
    name = config[len(IMPL_PREFIX) :]
    impl = job.implementations.get(name)
    if impl is None:
        raise GridError(f"the grid has no implementation {name!r} for {spec.run_id}: give --impl {name}")
    task_spec = job.task_spec(spec.task_id)
    task = await asyncio.to_thread(job.task, spec.task_id)
    scripted = spec.model == SCRIPTED
    with contextlib.ExitStack() as stack:
        scratch = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="rlm-impl-", dir=trajectory_dir))
        )
        started = time.perf_counter()
        trajectory = None
        endpoint = None
        try:
            endpoint = stack.enter_context(PolicyEndpoint(task, variant=spec.run_index)) if scripted else None
        except (RLMError, ToolError) as exc:  # e.g. a policy that cannot read this suite's query
            outcome = TaskOutcome(None, error_type=type(exc).__name__, error=f"scripted endpoint: {exc}")
        model = SCRIPTED_ENDPOINT_MODEL if scripted else spec.model
        api_base = endpoint.base_url if endpoint is not None else job.api_base
        api_key = "scripted-endpoint-needs-no-key" if scripted else job.api_key
        if scripted and endpoint is None:
            pass
        elif impl.start == "in-process":
            where = (model, api_base, api_key)
            try:
                outcome, trajectory = await _run_rlm_compat(job, spec, task, where, scratch, persistent)
            except (RLMError, ToolError) as exc:
                outcome = TaskOutcome(None, error_type=type(exc).__name__, error=str(exc))
        else:
            context_file = scratch / "context.txt"
            await asyncio.to_thread(context_file.write_text, task.context, encoding="utf-8")
            outcome = await asyncio.to_thread(
                run_driver_task,
                impl,
                query=task.query,
                context_file=context_file,
                model=model,
                api_base=api_base,
                api_key=api_key,
                max_iterations=job.max_iterations,
                time_limit=job.time_limit,
                log_dir=scratch / "log",
                extra=task_extra(task, persistent),
            )
        wall = time.perf_counter() - started
        logs, (calls, prompt_tokens, completion_tokens) = _logs_and_usage(scratch, endpoint, outcome)
    run_name = trajectory_name(spec.run_id)
    turns, grade = graded_turns(spec, task, turn_graders(task_spec), outcome, persistent=persistent)
    record = RunRecord(
        spec,
        task.corpus_sha256,
        outcome.answer,
        grade,
        int(outcome.iterations or 0),
        calls,
        prompt_tokens,
        completion_tokens,
        round(wall, 6),
        outcome.error_type,
        outcome.error,
        f"trajectories/{run_name}" if trajectory is not None else None,
        outcome.cost_usd,
        f"logs/{run_name.removesuffix('.jsonl')}" if logs else None,
        tuple(turns) if len(turns) > 1 else (),
    )
    return CellResult(record.to_json(), trajectory, logs)


async def _run_rlm_compat(
    job: GridJob,
    spec: RunSpec,
    task: TaskInstance,
    where: tuple[str, str | None, str | None],
    scratch: Path,
    persistent: bool,
) -> tuple[TaskOutcome, str | None]:
    """rlm_compat as an implementation: profile ``fixed`` through litellm, like the others
    (``where``: model, api_base, api_key); a task with follow-ups or tools through :mod:`.turns`."""
    from ....core import RLM

    model, api_base, api_key = where
    if task.followups or task.tools or persistent:
        settings = TurnSettings(
            model,
            "fixed",
            api_base,
            api_key,
            job.max_iterations,
            job.isolation,
            job.repl_timeout,
            job.max_retries,
        )
        graders = turn_graders(job.task_spec(spec.task_id))
        return await rlm_compat_turns(settings, spec, task, graders, scratch, persistent)
    path = scratch / "trajectory.jsonl"
    rlm = RLM(
        model,
        api_base=api_base,
        api_key=api_key,
        max_iterations=job.max_iterations,
        profile=Profile.named("fixed"),
        isolation=job.isolation,
        repl_timeout=job.repl_timeout,
        max_retries=job.max_retries,
        trajectory_path=path,
    )
    result = await rlm.atry_complete_result(task.query, task.context)
    stats = result.stats
    cost = stats.get("estimated_cost_usd")
    outcome = TaskOutcome(
        answer=result.answer,
        iterations=int(stats.get("total_iterations", 0)),
        calls=int(stats.get("llm_calls", 0)),
        prompt_tokens=int(stats.get("prompt_tokens", 0)),
        completion_tokens=int(stats.get("completion_tokens", 0)),
        cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
        error_type=getattr(result, "error_type", None),
        error=getattr(result, "error", None),
    )
    return outcome, path.read_text(encoding="utf-8") if path.exists() else None


def _logs_and_usage(
    scratch: Path, endpoint: Any, outcome: TaskOutcome
) -> tuple[dict[str, str], tuple[int, int, int]]:
    """The run's raw logs (with the scripted endpoint's transcript) and its calls and tokens: as
    the endpoint counted them when there is one, else as the implementation reported them."""
    logs = _collect_logs(scratch / "log")
    if endpoint is not None and endpoint.server.requests:
        logs["endpoint.jsonl"] = endpoint.transcript()
    if endpoint is not None:
        return logs, endpoint.usage()
    return logs, (outcome.calls or 0, outcome.prompt_tokens or 0, outcome.completion_tokens or 0)


_LOG_CAP = 20_000_000  # characters of raw log kept per run


def _collect_logs(directory: Path) -> dict[str, str]:
    """The implementation's raw log files (its stderr, its own trajectory files), by name."""
    if not directory.is_dir():
        return {}
    out: dict[str, str] = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and ".home" not in path.relative_to(directory).parts:
            text = path.read_text(encoding="utf-8", errors="replace")
            if text:
                out[str(path.relative_to(directory))] = text[:_LOG_CAP]
    return out


class RunLog:
    """``runs.jsonl``: one record per finished run, appended and flushed as each run ends.

    Opening it reads what is there; a last line cut short (the grid was killed mid-write) is
    dropped from the file, so a resumed grid appends clean lines after the last whole one.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, RunRecord] = {}
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        good = 0
        for number, line in enumerate(data.splitlines(keepends=True), start=1):
            whole = line.endswith(b"\n")
            try:
                record = RunRecord.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError) as exc:
                if whole and good + len(line) < len(data):
                    raise GridError(
                        f"{self.path}:{number} is not a run record ({type(exc).__name__}: {exc}); "
                        "fix or remove that line to resume, or use a new --out directory"
                    ) from None
                break
            if not whole:
                break
            self.records[record.spec.run_id] = record
            good += len(line)
        if good < len(data):
            with self.path.open("r+b") as stream:
                stream.truncate(good)

    def pending(self, specs: Iterable[RunSpec]) -> list[RunSpec]:
        """The specs still to run: those whose ``run_id`` has no record yet."""
        return [s for s in specs if s.run_id not in self.records]

    def append(self, record: RunRecord) -> None:
        """Write one record line and flush it (a killed grid loses at most the line being written)."""
        line = json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        with self.path.open("a", encoding="utf-8", newline="\n") as stream:
            stream.write(line + "\n")
        self.records[record.spec.run_id] = record
