"""The comparison grid: ``rlm-compat compare`` end to end, resumption, executors, tables, charts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compare_suite
import pytest
from locations import TESTS

from rlm_compat.clients import ScriptedClient
from rlm_compat.errors import ConfigurationError
from rlm_compat.profiles import QUIRKS, Profile
from rlm_compat.record import read_trajectory
from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.cli import main
from rlm_compat.tools.research.base import Grade, RunRecord, RunSpec, TaskInstance
from rlm_compat.tools.research.compare.comparison import run_grid
from rlm_compat.tools.research.compare.executors import LocalExecutor, RayExecutor, executor_from_spec
from rlm_compat.tools.research.compare.grid import (
    GridError,
    GridJob,
    RunLog,
    expand_configs,
    plan,
    trajectory_name,
)
from rlm_compat.tools.research.compare.suite_registry import resolve_suite
from rlm_compat.tools.research.compare.tables import markdown, summarize

# once_per_ci: the grid's orchestration (its store, resume after a kill, executors, summaries) is the
# same code on every Python; the runs inside it are checked on every Python by the loop's and the
# conformance suites
pytestmark = pytest.mark.once_per_ci

SUITE = "compare_suite:needle_suite"
POLICY = "compare_suite:policy"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _records(out: Path) -> list[RunRecord]:
    lines = (out / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    return [RunRecord.from_json(json.loads(line)) for line in lines]


def _deterministic(record: RunRecord) -> dict[str, Any]:
    data = record.to_json()
    del data["wall_seconds"]
    return data


def _assert_png(path: Path) -> None:
    from matplotlib.image import imread

    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000, path
    height, width = imread(path).shape[:2]
    assert height > 100 and width > 100


def test_scripted_grid_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "grid"
    code = main(
        [
            *("compare", "--suite", SUITE, "--policy", POLICY, "--config", "fixed", "--config", "upstream"),
            *(
                "--config",
                "upstream-without:imports_refused",
                "--runs",
                "2",
                "--out",
                str(out),
                "--no-progress",
            ),
        ]
    )
    assert code == 0
    assert "24 runs planned, 0 already done, 24 run now" in capsys.readouterr().out
    records = _records(out)
    suite = compare_suite.needle_suite()
    expected = {s.run_id for s in plan(suite, expand_configs(["fixed", "upstream"]), "scripted", 2)}
    assert expected < {r.spec.run_id for r in records} and len(records) == 24
    for record in records:
        task = next(t for t in suite.tasks() if t.task_id == record.spec.task_id)
        assert record.answer == task.code and record.grade.passed, record
        assert record.corpus_sha256 == task.build().corpus_sha256
        # upstream refuses `import re`: the policy retries without it, one iteration more
        assert record.iterations == (3 if record.spec.config == "upstream" else 2)
        assert record.calls == record.iterations and record.error_type is None
        assert record.trajectory is not None
        _header, events = read_trajectory(out / record.trajectory)
        kinds = [e["kind"] if isinstance(e, dict) else e.kind for e in events]
        assert kinds[-1] == "run_end", kinds
    assert len(list((out / "trajectories").iterdir())) == 24

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["schema"] == "rlm_compat.compare.summary" and summary["runs"] == 24
    assert summary["configs"] == ["fixed", "upstream", "upstream-without:imports_refused"]
    assert summary["sizes"] == [2_000, 10_000]
    by_config = {row["config"]: row for row in summary["by_config"]}
    assert by_config["upstream"]["mean_iterations"] == 3 and by_config["fixed"]["mean_iterations"] == 2
    assert all(row["pass_rate"] == 1 and row["runs"] == 8 for row in by_config.values())
    assert len(summary["cells"]) == 6 and all(c["runs"] == 4 for c in summary["cells"])
    (ablation,) = summary["ablation"]
    assert ablation["quirk"] == "imports_refused" and ablation["direction"] == "off_in_upstream"
    assert ablation["delta_iterations"] == -1 and ablation["delta_pass_rate"] == 0
    assert summary["charts"] == ["pass_rate.png", "ablation.png"]
    for chart in summary["charts"]:
        _assert_png(out / chart)
    table = (out / "summary.md").read_text(encoding="utf-8")
    assert "| `upstream` | 8 | 100.0 % | 0 | 3.00 |" in table
    assert "| `imports_refused` | off in upstream | 8 | 100.0 % | +0.0 pp | 2.00 | -1.00 |" in table


def test_resumption_skips_finished_runs_and_a_cut_last_line(tmp_path: Path) -> None:
    suite = compare_suite.needle_suite()
    built: list[str] = []

    def counting_policy(task: TaskInstance, spec: RunSpec) -> ScriptedClient:
        built.append(spec.run_id)
        return compare_suite.policy(task, spec)

    job = GridJob(suite, counting_policy)
    specs = plan(suite, ["fixed", "upstream"], "scripted", 1)
    out = tmp_path / "grid"
    first = run_grid(job, specs[:5], out, LocalExecutor(2), progress=False, charts=False)
    assert (first.planned, first.skipped, first.ran) == (5, 0, 5) and len(built) == 5
    # a grid killed while writing its sixth line
    log = out / "runs.jsonl"
    whole = log.read_text(encoding="utf-8")
    with log.open("a", encoding="utf-8") as stream:
        stream.write(whole.splitlines()[0][:40])
    built.clear()
    second = run_grid(job, specs, out, LocalExecutor(2), progress=False, charts=False)
    assert (second.planned, second.skipped, second.ran) == (8, 5, 3)
    assert sorted(built) == sorted(s.run_id for s in specs[5:])
    records = _records(out)
    assert sorted(r.spec.run_id for r in records) == sorted(s.run_id for s in specs)
    assert log.read_text(encoding="utf-8").startswith(whole)
    built.clear()
    third = run_grid(job, specs, out, LocalExecutor(2), progress=False, charts=False)
    assert (third.skipped, third.ran, built) == (8, 0, [])
    assert second.summary["by_config"] == third.summary["by_config"]


def test_a_corrupt_line_inside_the_log_is_an_error_not_a_silent_rerun(tmp_path: Path) -> None:
    suite = compare_suite.needle_suite()
    specs = plan(suite, ["fixed"], "scripted", 1)
    out = tmp_path / "grid"
    run_grid(GridJob(suite, compare_suite.policy), specs, out, LocalExecutor(), progress=False, charts=False)
    log = out / "runs.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    log.write_text(lines[0] + "{not json\n" + "".join(lines[1:]), encoding="utf-8")
    with pytest.raises(GridError, match=r"runs.jsonl:2 is not a run record"):
        RunLog(log)


def test_one_directory_holds_one_suite_and_one_model(tmp_path: Path) -> None:
    suite = compare_suite.needle_suite()
    job = GridJob(suite, compare_suite.policy)
    out = tmp_path / "grid"
    run_grid(
        job, plan(suite, ["fixed"], "scripted", 1)[:1], out, LocalExecutor(), progress=False, charts=False
    )
    with pytest.raises(GridError, match=r"would mix runs of models \['gpt-x', 'scripted'\]"):
        run_grid(job, plan(suite, ["fixed"], "gpt-x", 1), out, LocalExecutor(), progress=False)
    other = compare_suite.NeedleSuite(name="other")
    with pytest.raises(GridError, match="would mix runs of suites"):
        run_grid(job, plan(other, ["fixed"], "scripted", 1), out, LocalExecutor(), progress=False)
    assert len(_records(out)) == 1


def test_litellm_model_through_the_loopback_server(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = chat_server(compare_suite.server_reply)
    monkeypatch.setenv("LOOPBACK_KEY", "sk-loopback")
    out = tmp_path / "grid"
    code = main(
        [
            *(
                "compare",
                "--suite",
                SUITE,
                "--config",
                "fixed",
                "--config",
                "upstream",
                "--model",
                "openai/needle",
            ),
            *("--api-base", server.base_url, "--out", str(out), "--no-progress", "--concurrency", "2"),
            *("--api-key-env", "LOOPBACK_KEY"),
        ]
    )
    assert code == 0
    records = _records(out)
    assert len(records) == 8
    assert all(r.grade.passed and r.spec.model == "openai/needle" for r in records)
    assert sum(r.calls for r in records) == len(server.requests) == 20
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in records)
    assert {req["model"] for req in server.requests} == {"needle"}
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["models"] == ["openai/needle"]
    assert all(row["mean_tokens"] > 0 for row in summary["by_config"])


class _RayProbe:
    """The Ray executor, noting the addresses of the Ray nodes while the grid runs."""

    name = "ray"

    def __init__(self) -> None:
        self.inner = RayExecutor(num_cpus=2)
        self.addresses: set[str] = set()

    def run(self, job: GridJob, specs: Any, on_result: Any) -> None:
        import ray

        def seen(cell: Any) -> None:
            self.addresses |= {node["NodeManagerAddress"] for node in ray.nodes()}
            on_result(cell)

        self.inner.run(job, specs, seen)


# once_per_ci: a local ray cluster's start-up (~15 s) to check that the executors agree; the grid's own
# runs are checked on every Python by the local executor's tests
@pytest.mark.once_per_ci
def test_local_and_ray_executors_give_identical_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray on loopback only (read at Ray's import, so set before the test imports it)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    pytest.importorskip("ray")
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(compare_suite)  # Ray workers need not import the tests
    suite = compare_suite.needle_suite()
    job = GridJob(suite, compare_suite.policy)
    specs = plan(suite, ["fixed", "upstream", "fixed-with:imports_refused"], "scripted", 1)
    local = run_grid(job, specs, tmp_path / "local", LocalExecutor(2), progress=False, charts=False)
    probe = _RayProbe()
    ray = run_grid(job, specs, tmp_path / "ray", probe, progress=False, charts=False)
    assert local.ran == ray.ran == len(specs) == 12
    assert probe.addresses == {"127.0.0.1"}
    by_local = {r.spec.run_id: _deterministic(r) for r in _records(tmp_path / "local")}
    by_ray = {r.spec.run_id: _deterministic(r) for r in _records(tmp_path / "ray")}
    assert by_local == by_ray
    for run_id, record in by_local.items():
        assert record["trajectory"] == f"trajectories/{trajectory_name(run_id)}"
        texts = [(tmp_path / side / record["trajectory"]).read_text() for side in ("local", "ray")]
        kinds = [[json.loads(line).get("kind") for line in text.splitlines()[1:]] for text in texts]
        assert kinds[0] == kinds[1] and kinds[0][-1] == "run_end"


def test_ablation_configs_cover_every_upstream_quirk_both_ways() -> None:
    configs = expand_configs(["upstream"], ablation=True)
    on_in_upstream = [q for q in QUIRKS if Profile.upstream().quirks()[q]]
    assert configs[:2] == ["upstream", "fixed"]
    assert sorted(configs[2:]) == sorted(
        [f"upstream-without:{q}" for q in on_in_upstream] + [f"fixed-with:{q}" for q in on_in_upstream]
    )
    assert len(configs) == len(set(configs)) == 2 + 2 * len(on_in_upstream)
    with pytest.raises(ConfigurationError, match="known switches"):
        expand_configs(["upstream-without:no_such_quirk"])
    with pytest.raises(ToolUsageError, match="at least one --config"):
        expand_configs([])


def _record(task: str, config: str, passed: bool, iterations: int, index: int = 0) -> RunRecord:
    spec = RunSpec("s", task, config, "scripted", index)
    return RunRecord(spec, "h", "a", Grade(passed, "", "g", "1"), iterations, iterations, 10, 5, 0.5)


def test_ablation_deltas_use_only_the_runs_both_sides_have() -> None:
    records = [
        _record("t1", "upstream", False, 4),
        _record("t2", "upstream", True, 2),
        _record("t3", "upstream", False, 6),
        _record("t1", "upstream-without:imports_refused", True, 2),
        _record("t2", "upstream-without:imports_refused", True, 2),
        _record("t1", "fixed", True, 1),
        _record("t1", "fixed-with:separate_scopes", False, 3),
    ]
    summary = summarize(records, {"t1": 10_000, "t2": 10_000, "t3": 100_000})
    rows = {row["config"]: row for row in summary["ablation"]}
    off = rows["upstream-without:imports_refused"]
    assert (off["runs"], off["baseline_pass_rate"], off["pass_rate"]) == (2, 0.5, 1.0)
    assert (off["delta_pass_rate"], off["delta_iterations"]) == (0.5, -1.0)
    on = rows["fixed-with:separate_scopes"]
    assert (on["direction"], on["delta_pass_rate"], on["delta_iterations"]) == ("on_in_fixed", -1.0, 2.0)
    upstream = next(row for row in summary["by_config"] if row["config"] == "upstream")
    assert upstream["pass_rate"] == round(1 / 3, 6) and upstream["mean_tokens"] == 15
    assert [(c["config"], c["size"]) for c in summary["cells"]][:2] == [
        ("fixed", 10_000),
        ("upstream", 10_000),
    ]
    by_size = {(row["size"], row["config"]): row for row in summary["ablation_by_size"]}
    assert set(by_size) == {
        (10_000, "upstream-without:imports_refused"),
        (10_000, "fixed-with:separate_scopes"),
    }
    assert by_size[10_000, "upstream-without:imports_refused"]["delta_pass_rate"] == 0.5
    text = markdown(summary)
    assert "| `imports_refused` | off in upstream | 2 | 100.0 % | +50.0 pp | 2.00 | -1.00 |" in text
    assert "| `upstream` | 100 k | 1 | 0.0 % |" in text


def test_trajectory_names_are_safe_and_unique() -> None:
    a = trajectory_name("s/t/upstream-without=x/openai/gpt-4o/0")
    b = trajectory_name("s/t/upstream-without=x/openai_gpt-4o/0")
    assert a != b and "/" not in a and a.endswith(".jsonl")


def test_bad_invocations_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--suite", "no_such_module:x", "--config", "fixed", "--out", str(tmp_path)]) == 1
    assert "cannot import 'no_such_module'" in capsys.readouterr().err
    with pytest.raises(ToolUsageError, match="executor"):
        executor_from_spec("dask")
    with pytest.raises(ToolUsageError, match="concurrency"):
        LocalExecutor(0)
    with pytest.raises(ToolUsageError, match="not a Suite"):
        resolve_suite("compare_suite:WORDS")
    with pytest.raises(ToolUsageError, match="runs must be"):
        plan(compare_suite.needle_suite(), ["fixed"], "scripted", 0)
    with pytest.raises(ToolUsageError, match="has no tasks"):
        plan(compare_suite.NeedleSuite(sizes=()), ["fixed"], "scripted", 1)
    with pytest.raises(ToolUsageError, match=r"repeats task ids \['needle-2000-s0'\]"):
        plan(compare_suite.NeedleSuite(sizes=(2000,), seeds=(0, 0)), ["fixed"], "scripted", 1)


def test_a_killed_grid_resumes_where_it_stopped(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL the CLI mid-grid, then run the same command: only the unfinished runs run.

    The server holds every request after the sixth (a run takes 2 calls under fixed, 3 under
    upstream; one run at a time), so the first two runs always finish and the kill lands while a
    later one waits, whatever the machine's load.
    """
    import itertools
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    gate = threading.Event()
    numbers = itertools.count(1)

    def held_after_six(request: dict[str, Any]) -> str:
        if next(numbers) > 6:
            gate.wait(60)
        return compare_suite.server_reply(request)

    server = chat_server(held_after_six)
    out = tmp_path / "grid"
    argv = [
        *("compare", "--suite", SUITE, "--config", "fixed", "--config", "upstream", "--model", "openai/n"),
        *("--api-base", server.base_url, "--api-key-env", "LOOPBACK_KEY", "--out", str(out)),
        *("--no-progress", "--concurrency", "1"),
    ]
    tests = str(TESTS)
    env = {**os.environ, "LOOPBACK_KEY": "sk-loopback"}
    env["PYTHONPATH"] = os.pathsep.join([tests, *filter(None, [env.get("PYTHONPATH")]), *sys.path])
    child = subprocess.Popen([sys.executable, "-m", "rlm_compat", *argv], env=env)
    log = out / "runs.jsonl"
    deadline = time.monotonic() + 120  # only a broken grid gets near this
    try:
        while not (log.exists() and log.read_text(encoding="utf-8").count("\n") >= 2):
            assert child.poll() is None and time.monotonic() < deadline, "the grid never wrote two runs"
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        gate.set()
    before = list(RunLog(log).records.values())
    assert 2 <= len(before) <= 3
    monkeypatch.setenv("LOOPBACK_KEY", "sk-loopback")
    assert main(argv) == 0
    records = _records(out)
    # finished runs kept as they were and not run again (a rerun would duplicate its run_id)
    assert records[: len(before)] == before
    assert len(records) == len({r.spec.run_id for r in records}) == 8
    assert all(r.grade.passed for r in records)


def test_a_grids_runs_over_one_task_share_its_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mapped_writes: list[int]
) -> None:
    """The grid builds a task once, so its runs hand the workers the same text: one context
    template holds it, written into a memory file once for all the task's runs."""
    from rlm_compat.sandbox import shared_contexts
    from rlm_compat.sandbox.isolate import templates

    monkeypatch.setattr(templates, "SHARED_MIN", 5_000)
    suite = compare_suite.NeedleSuite(sizes=(10_000,), seeds=(0,))
    job = GridJob(suite, compare_suite.policy, isolation="process")
    specs = plan(suite, ["fixed"], "scripted", 3)
    result = run_grid(job, specs, tmp_path / "grid", LocalExecutor(2), progress=False, charts=False)
    assert result.ran == 3 and all(r.grade.passed for r in _records(tmp_path / "grid"))
    context = job.task(specs[0].task_id).context
    assert [n for n in mapped_writes if n >= 5_000] == [len(context)]
    assert [shared.size for shared in shared_contexts()].count(len(context)) == 1
