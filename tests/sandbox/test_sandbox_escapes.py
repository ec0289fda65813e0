"""The escape / abuse corpus (tests/escape_corpus.py) run against both profiles.

For every case the host checks, from outside the sandbox:

* the outcome: a ``REPLError`` (subclass) with a readable message, or a normal return for cases that
  are merely ``contained``; never any other exception (``SystemExit`` included);
* no escape: no ``ESCAPED`` marker, no real module / frame / code object / traceback / cell / file /
  builtins dict / module ``__dict__`` / dangerous builtin anywhere in ``env``, and the host secret
  (in ``os.environ`` and in the globals of ``helper``) in no text the sandbox hands back;
* no host-state change: sys.stdout / stderr / stdin, os.environ, sys.modules keys, the builtins
  module, threads, the working directory and its files, signal handlers, recursion limit, trace and
  profile hooks, the global random state, import machinery, and the contents of the allowlisted
  modules, their classes and rlm_compat's own modules; nothing written to the real stdout;
* the executor and the env stay usable, the attribute guard still holds, and other envs and
  executors see intact builtins.

Cases without a resource ``bound`` run in-process, each inside a daemon thread with a hard deadline,
so a sandbox bug fails the test instead of hanging CI. Resource bombs run in a child process (this
file executed as a script) with a 2 GB address-space limit and a hard kill; the child reports back
as JSON and the same checks are applied here.
"""

from __future__ import annotations

import builtins
import collections
import collections.abc
import copyreg
import dataclasses
import datetime
import functools
import gc
import importlib
import io
import itertools
import json
import json.decoder
import json.encoder
import json.scanner
import math
import os
import random
import re
import resource
import signal
import statistics
import string
import subprocess
import sys
import textwrap
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from escape_corpus import BY_ID, CATEGORIES, CORPUS, EscapeCase
from examples import lean_pairs, profile_pairs

from rlm_compat.errors import REPLError, REPLTimeoutError
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox import host_call

PROFILES = ("fixed", "upstream")
INLINE_TIMEOUT = 2.0
CHILD_TIMEOUT = 0.5
MAX_OUTPUT = 2000
CHILD_ADDRESS_SPACE = 2 * 1024**3
REPORT_PREFIX = "@@ESCAPE-REPORT@@"
# Wall-clock bounds here tell a bounded case from a runaway one; they are not speed claims (those
# are measured in benchmarks/). CI runs two test workers on two cores beside other jobs, and a
# loaded machine stretched a 1 s memory bomb to 4 s, so every wall-clock bound carries this slack.
LOAD_SLACK = 20.0
# "Refused before computing" is judged on CPU time, which other processes do not inflate.
STATIC_CPU = 0.5

_SECRET_ENV = "RLM_COMPAT_TEST_SECRET"
_HOST_SECRET = "host-secret-7f3a9c1e5b"
os.environ[_SECRET_ENV] = _HOST_SECRET

_ISSUE11_MODULES = tuple(
    importlib.import_module(m)
    for m in (
        "csv", "io", "hashlib", "decimal", "fractions", "operator", "dataclasses", "typing",
        "unicodedata", "difflib", "time", "base64", "copy", "pprint", "html", "urllib.parse",
    )
)  # fmt: skip
_WATCHED_MODULES: tuple[types.ModuleType, ...] = (
    re,
    json,
    json.decoder,
    json.encoder,
    json.scanner,
    math,
    datetime,
    collections,
    collections.abc,
    itertools,
    functools,
    statistics,
    string,
    textwrap,
    random,
    copyreg,
    *_ISSUE11_MODULES,
)
_ALLOWED_CODE_MODULES = frozenset(m.__name__ for m in _WATCHED_MODULES if m is not copyreg) | {
    "_json",
    "_sre",
    "_functools",
    "_collections",
    "_datetime",
    "_random",
    "_statistics",
    "_string",
    "builtins",
    "_operator",
    "_csv",
    "_decimal",
    "_hashlib",
    "_md5",
    "_sha1",
    "_sha2",
    "_sha256",
    "_sha512",
    "_sha3",
    "_blake2",
    "_io",
    "binascii",
    "__main__",
    __name__,
}
_DANGEROUS_TYPES: tuple[type, ...] = (
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    types.CellType,
    io.IOBase,
    types.MappingProxyType,
)
_DANGEROUS_BUILTINS = frozenset(
    id(getattr(builtins, name))
    for name in (
        "open",
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "vars",
        "breakpoint",
        "input",
        "__import__",
        "getattr",
        "setattr",
        "delattr",
        "exit",
        "quit",
        "help",
        "__build_class__",
    )
    if hasattr(builtins, name)
)
_DANGEROUS_TYPE_MODULES = frozenset(
    {
        "os",
        "posix",
        "sys",
        "io",
        "_io",
        "codecs",
        "subprocess",
        "threading",
        "_thread",
        "signal",
        "ctypes",
        "site",
        "_sitebuiltins",
        "importlib",
        "pathlib",
        "shutil",
        "gc",
        "inspect",
    }
)


_HOST_CONFIG = types.SimpleNamespace(api_key=_HOST_SECRET, model="test-model")


def _host_helper(text: Any = "", option: str | None = None) -> str:
    """A host function in env (as the loop's ``recursive_llm`` is); its globals hold the secret.

    Like a real host function it inspects its argument and reads host configuration, so hostile
    arguments and host-side exceptions are exercised.
    """
    size = len(text) if text else 0
    if option is not None:
        return str(getattr(_HOST_CONFIG, option))
    return f"helper:{size}"


def make_env() -> dict[str, Any]:
    """A fresh env shaped like the RLM loop's: context, query, the raw ``re`` module, host functions."""
    return {
        "context": "alpha beta\ngamma ERROR 42\n",
        "query": "what?",
        "re": re,
        "helper": _host_helper,
        "hosted": host_call(_host_helper),
        "hostmod": os,
    }


# ------------------------------------------------------------------------------ host snapshot


def _ids(mapping: dict[str, Any]) -> dict[str, int]:
    return {k: id(v) for k, v in mapping.items()}


def _module_fingerprint(module: types.ModuleType) -> dict[str, object]:
    """Identity of every attribute; content of public mutable containers; class dict identities."""
    out: dict[str, object] = {}
    for name, value in list(vars(module).items()):
        out[name] = id(value)
        if name.startswith("_"):
            continue
        if type(value) is dict:
            out[name + "{}"] = tuple((repr(k), id(v)) for k, v in list(value.items()))
        elif type(value) in (list, set):
            out[name + "[]"] = tuple(sorted(repr(v) for v in list(value)))
        elif isinstance(value, type) and vars(value).get("__module__") == module.__name__:
            out[name + ".__dict__"] = tuple(sorted(_ids(dict(vars(value))).items()))
    return out


def _signal_handlers() -> dict[int, object]:
    handlers: dict[int, object] = {}
    for sig in signal.valid_signals():
        try:
            handlers[int(sig)] = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
    return handlers


def _take_snapshot() -> dict[str, object]:
    rlm_modules = sorted(n for n in sys.modules if n == "rlm_compat" or n.startswith("rlm_compat."))
    return {
        "sys.stdout": id(sys.stdout),
        "sys.stderr": id(sys.stderr),
        "sys.stdin": id(sys.stdin),
        "os.environ": dict(os.environ),
        "sys.modules": frozenset(sys.modules),
        "builtins": {k: v for k, v in _ids(vars(builtins)).items() if k != "_"},
        "cwd": os.getcwd(),
        "cwd files": sorted(os.listdir(".")),
        "signal handlers": _signal_handlers(),
        "recursion limit": sys.getrecursionlimit(),
        "trace": sys.gettrace(),
        "profile": sys.getprofile(),
        "switch interval": sys.getswitchinterval(),
        "random state": random.getstate(),
        "sys.path": list(sys.path),
        "meta_path": [id(f) for f in sys.meta_path],
        "path_hooks": [id(f) for f in sys.path_hooks],
        "hooks": (id(sys.displayhook), id(sys.excepthook), id(sys.unraisablehook), id(threading.excepthook)),
        "gc": (gc.isenabled(), gc.get_threshold()),
        "allowlisted modules": {m.__name__: _module_fingerprint(m) for m in _WATCHED_MODULES},
        "rlm_compat modules": {n: _ids(dict(vars(sys.modules[n]))) for n in rlm_modules},
    }


def _snapshot_diff(before: dict[str, object], after: dict[str, object]) -> list[str]:
    diffs: list[str] = []
    for key, old in before.items():
        new = after[key]
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            if key == "rlm_compat modules":
                changed = [k for k in changed if k in old]  # a newly imported submodule is fine
                if not changed:
                    continue
            diffs.append(f"{key} changed: {changed[:10]}")
        elif isinstance(old, frozenset) and isinstance(new, frozenset):
            diffs.append(f"{key} changed: +{sorted(new - old)[:10]} -{sorted(old - new)[:10]}")
        else:
            diffs.append(f"{key} changed: {str(old)[:200]!s} -> {str(new)[:200]!s}")
    return diffs


@dataclasses.dataclass
class _SavedHost:
    """The host objects an escaping snippet could damage, kept so one bad case cannot wreck the run."""

    streams: tuple[Any, Any, Any]
    environ: dict[str, str]
    modules: dict[str, Any]
    builtins: dict[str, Any]
    limits: tuple[int, float]
    hooks: tuple[Any, ...]
    random_state: object
    paths: tuple[list[Any], list[Any], list[Any]]
    handlers: dict[int, object]
    cwd: str
    module_dicts: dict[str, dict[str, Any]]
    class_dicts: dict[int, tuple[type, dict[str, Any]]]


def _save_host() -> _SavedHost:
    classes: dict[int, tuple[type, dict[str, Any]]] = {}
    for module in _WATCHED_MODULES:
        for value in list(vars(module).values()):
            if isinstance(value, type) and vars(value).get("__module__") == module.__name__:
                classes[id(value)] = (value, dict(vars(value)))
    return _SavedHost(
        streams=(sys.stdout, sys.stderr, sys.stdin),
        environ=dict(os.environ),
        modules=dict(sys.modules),
        builtins=dict(vars(builtins)),
        limits=(sys.getrecursionlimit(), sys.getswitchinterval()),
        hooks=(
            sys.gettrace(),
            sys.getprofile(),
            sys.displayhook,
            sys.excepthook,
            sys.unraisablehook,
            threading.excepthook,
        ),
        random_state=random.getstate(),
        paths=(list(sys.path), list(sys.meta_path), list(sys.path_hooks)),
        handlers=_signal_handlers(),
        cwd=os.getcwd(),
        module_dicts={m.__name__: dict(vars(m)) for m in _WATCHED_MODULES},
        class_dicts=classes,
    )


def _restore_dict(target: dict[str, Any], saved: dict[str, Any]) -> None:
    for key in [k for k in target if k not in saved]:
        del target[key]
    for key, value in saved.items():
        if target.get(key, target) is not value:
            target[key] = value


def _restore_host(saved: _SavedHost) -> None:
    """Undo whatever an escaping snippet changed (main thread: signal handlers need it)."""
    sys.stdout, sys.stderr, sys.stdin = saved.streams
    if dict(os.environ) != saved.environ:
        os.environ.clear()
        os.environ.update(saved.environ)
    _restore_dict(sys.modules, saved.modules)
    _restore_dict(vars(builtins), saved.builtins)
    sys.setrecursionlimit(saved.limits[0])
    sys.setswitchinterval(saved.limits[1])
    trace, profile, displayhook, excepthook, unraisablehook, thread_hook = saved.hooks
    sys.settrace(trace)
    sys.setprofile(profile)
    sys.displayhook, sys.excepthook, sys.unraisablehook = displayhook, excepthook, unraisablehook
    threading.excepthook = thread_hook
    random.setstate(saved.random_state)  # type: ignore[arg-type]
    sys.path[:], sys.meta_path[:], sys.path_hooks[:] = saved.paths
    for sig, handler in saved.handlers.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            try:
                signal.signal(sig, handler)  # type: ignore[arg-type]
            except (OSError, ValueError, TypeError):
                pass
    os.chdir(saved.cwd)
    for module in _WATCHED_MODULES:
        _restore_dict(vars(module), saved.module_dicts[module.__name__])
    for cls, attrs in saved.class_dicts.values():
        current = dict(vars(cls))
        for key in [k for k in current if k not in attrs]:
            try:
                delattr(cls, key)
            except (AttributeError, TypeError):
                pass
        for key, value in attrs.items():
            if current.get(key, current) is not value:
                try:
                    setattr(cls, key, value)
                except (AttributeError, TypeError):
                    pass


def _wait_threads(count: int, limit: float = LOAD_SLACK) -> int:
    deadline = time.monotonic() + limit
    while threading.active_count() > count and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count()


# ------------------------------------------------------------------------------ escape scan


def _type_module(obj: object) -> str:
    module = vars(type(obj)).get("__module__")
    return module if isinstance(module, str) else ""


def _dangerous(value: object, module_dicts: set[int]) -> str | None:
    """Why ``value`` must never be reachable from sandboxed code, or None. Never runs user code."""
    kind = type(value)
    for dangerous in _DANGEROUS_TYPES:
        if issubclass(kind, dangerous):
            return f"a real {dangerous.__name__}: {kind.__name__}"
    if id(value) in module_dicts:
        return "a module __dict__"
    if value is sys.modules:
        return "sys.modules"
    if id(value) in _DANGEROUS_BUILTINS:
        return f"the real builtin {getattr(value, '__name__', '?')}"
    if kind is dict and ("__import__" in value or "_getattr_" in value or "_print_" in value):  # type: ignore[operator]
        return "a builtins mapping"
    if kind is types.BuiltinFunctionType:
        owner = value.__self__  # type: ignore[attr-defined]
        if type(owner) is types.ModuleType and owner.__name__ not in _ALLOWED_CODE_MODULES:
            return f"a function of module {owner.__name__}"
    if kind is types.FunctionType:
        # Sandbox-made functions carry a pseudo file name ("<...>"); host ones a real path.
        module = value.__globals__.get("__name__", "")  # type: ignore[attr-defined]
        allowed = module in _ALLOWED_CODE_MODULES or module.startswith("rlm_compat")
        if not allowed and not value.__code__.co_filename.startswith("<"):  # type: ignore[attr-defined]
            return f"a host function from module {module}"
    if kind is types.MethodType:
        return _dangerous(value.__self__, module_dicts) or _dangerous(value.__func__, module_dicts)  # type: ignore[attr-defined]
    if _type_module(value).split(".")[0] in _DANGEROUS_TYPE_MODULES:
        return f"an object of host type {_type_module(value)}.{kind.__name__}"
    return None


def _walk(value: object, depth: int = 0) -> Iterator[object]:
    """The value and the items of plain containers inside it (exact builtin types only)."""
    yield value
    if depth >= 5:
        return
    kind = type(value)
    items: list[object]
    if kind in (list, tuple, set, frozenset):
        items = list(itertools.islice(value, 5000))  # type: ignore[call-overload]
    elif kind is dict:
        items = [*itertools.islice(value, 5000), *itertools.islice(value.values(), 5000)]  # type: ignore[call-overload,attr-defined]
    else:
        return
    for item in items:
        yield from _walk(item, depth + 1)


def _escapes(env: dict[str, Any], provided: dict[str, Any], texts: list[str]) -> list[str]:
    """Everything in env or the returned texts that proves an escape."""
    found: list[str] = []
    if "ESCAPED" in env:
        found.append(f"ESCAPED was assigned: {type(env['ESCAPED']).__name__}")
    module_dicts = {id(vars(m)) for m in list(sys.modules.values()) if m is not None}
    module_dicts.add(id(vars(builtins)))
    for key, value in list(env.items()):
        if key in provided and provided[key] is value:
            continue
        for item in _walk(value):
            reason = _dangerous(item, module_dicts)
            if reason:
                found.append(f"env[{key!r}] holds {reason}")
                break
            if type(item) is str and _HOST_SECRET in item:
                found.append(f"env[{key!r}] holds the host secret")
                break
    for text in texts:
        if "ESCAPED" in text:
            found.append(f"the returned text shows the ESCAPED marker: {text[:200]!r}")
        if _HOST_SECRET in text:
            found.append("the returned text contains the host secret")
    return found


def _unreadable(message: str) -> str | None:
    if not message.strip():
        return "empty message"
    if "Traceback (most recent call last)" in message or 'File "' in message:
        return "a traceback in the message"
    if "site-packages" in message or "rlm_compat/" in message or "rlm_compat\\" in message:
        return "an internal path in the message"
    if len(message) > 20_000:
        return f"a message of {len(message)} chars"
    return None


# ------------------------------------------------------------------------------ running a case


@dataclasses.dataclass
class Report:
    """What happened to one case in one profile; JSON-serialisable so a child process can send it."""

    case_id: str
    profile: str
    outcome: str = ""  # ok | error | foreign | unsupported
    output: str = ""
    exc_types: list[str] = dataclasses.field(default_factory=list)
    message: str = ""
    elapsed: float = 0.0
    cpu: float = 0.0
    rss_delta_kb: int = 0
    timeout: float = 0.0
    escapes: list[str] = dataclasses.field(default_factory=list)
    host_diff: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    gc_elapsed: float = 0.0


def _attempt(executor: REPLExecutor, code: str, env: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", executor.execute(code, env)
    except REPLError as exc:
        return "error", exc
    except BaseException as exc:
        return "foreign", exc


def _expect_output(
    executor: REPLExecutor, code: str, env: dict[str, Any], expected: str, what: str, problems: list[str]
) -> None:
    kind, value = _attempt(executor, code + "\nprobe_done = 1", env)
    if kind != "ok" or value != expected:
        problems.append(f"{what}: expected {expected!r}, got {kind} {str(value)[:300]!r}")


def _expect_refused(
    executor: REPLExecutor, code: str, env: dict[str, Any], what: str, problems: list[str]
) -> None:
    kind, value = _attempt(executor, code, env)
    if kind != "error":
        problems.append(f"{what}: expected a REPLError, got {kind} {str(value)[:300]!r}")


def _after_checks(case: EscapeCase, executor: REPLExecutor, env: dict[str, Any], problems: list[str]) -> None:
    """The executor and env stay usable, the guard still holds, other envs see intact builtins."""
    profile = executor.profile
    _expect_output(
        executor, "probe_value = 41 + 1\nprint(probe_value)", env, "42", "same env still usable", problems
    )
    if env.get("probe_value") != 42:
        problems.append(f"same env: probe_value is {env.get('probe_value')!r}, not 42")
    _expect_refused(
        executor,
        "probe_attr = getattr(getattr(1, '__cl' + 'ass__'), '__subcl' + 'asses__')",
        env,
        "attribute guard in the same env",
        problems,
    )
    fresh = make_env()
    _expect_refused(
        executor,
        "probe_attr = getattr(getattr(1, '__cl' + 'ass__'), '__subcl' + 'asses__')",
        fresh,
        "attribute guard in a fresh env",
        problems,
    )
    _expect_output(executor, "print(len('abc'))", make_env(), "3", "builtins in a fresh env", problems)
    if case.probe is not None:
        _expect_output(
            executor, case.probe.code, make_env(), case.probe.output, "probe with the same executor", problems
        )
        other = REPLExecutor(timeout=executor.timeout, max_output_chars=MAX_OUTPUT, profile=profile)
        _expect_output(
            other, case.probe.code, make_env(), case.probe.output, "probe with a new executor", problems
        )
    if case.category == "env_leak" and callable(env.get("show")):
        before = set(env)
        for runner in (executor, REPLExecutor(timeout=executor.timeout, profile=profile)):
            other_env = make_env()
            other_env["show"] = env["show"]
            kind, value = _attempt(runner, "r = show()\nprint(r)\nr_done = 1", other_env)
            if kind == "foreign":
                problems.append(f"reused function: {type(value).__name__}: {value}")
            if "secret_a" in other_env:
                problems.append("reused function: secret_a leaked into the other env")
            # Its prints reach only steps of its own executor (session), never another's.
            expected = "show AAA\nAAA" if runner is executor else "AAA"
            if profile.name == "fixed" and (kind, value) != ("ok", expected):
                problems.append(f"reused function in profile fixed: got {kind} {value!r}")
        if set(env) != before:
            problems.append(f"reused function changed its home env: {sorted(set(env) ^ before)}")
    if profile.name == "fixed":
        private = sorted(k for k in env if k == "_print" or (k[:1] == "_" and k[-1:] == "_" and k != "_"))
        if private:
            problems.append(f"guard / private names left in env: {private}")


def run_case(case: EscapeCase, profile: str, *, timeout: float, isolation: str = "inline") -> Report:
    """Run one case with every host-side check; usable in-process and in a child process."""
    report = Report(case.id, profile, timeout=timeout)
    try:
        executor = REPLExecutor(
            timeout=timeout, max_output_chars=MAX_OUTPUT, profile=profile, isolation=isolation
        )
    except (REPLError, ValueError, TypeError, NotImplementedError) as exc:
        report.outcome, report.message = "unsupported", f"{type(exc).__name__}: {exc}"
        return report
    executor.execute("warm_up = 1\nprint(warm_up)", make_env())
    env = make_env()
    provided = dict(env)
    threads = _wait_threads(threading.active_count())
    before = _take_snapshot()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, cpu_started = time.perf_counter(), time.process_time()
    kind, value = _attempt(executor, case.code, env)
    report.elapsed = time.perf_counter() - started
    report.cpu = time.process_time() - cpu_started
    report.rss_delta_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    report.outcome = kind
    texts: list[str] = []
    if kind == "ok":
        report.output = str(value)
        texts.append(report.output)
    else:
        report.exc_types = [cls.__name__ for cls in type(value).__mro__]
        report.message = str(value)
        texts.append(report.message)
    report.escapes = _escapes(env, provided, texts)
    if _wait_threads(threads) > threads:
        report.host_diff.append(f"threads: {threads} -> {threading.active_count()}")
    report.host_diff += _snapshot_diff(before, _take_snapshot())
    _after_checks(case, executor, env, report.problems)
    del value
    if case.bound == "gc":
        started = time.perf_counter()
        for value in list(env.values()):  # what a host does with results: FINAL_VAR is str(env[x])
            str(value)
            repr(value)
        env.clear()
        gc.collect()
        report.gc_elapsed = time.perf_counter() - started
    return report


def _run_bounded(fn: Callable[[], Report], limit: float) -> Report:
    """Run ``fn`` in a daemon thread; fail the test (instead of hanging) when it overruns."""
    box: list[Report | BaseException] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    worker = threading.Thread(target=target, daemon=True, name="escape-case")
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        pytest.fail(f"the case did not finish within {limit:.0f} s: the sandbox hung the host")
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _marker_len(max_chars: int, total: int) -> int:
    return len(f"\n\n[Output truncated: {total} chars total, showing first {max_chars}]")


def check_report(case: EscapeCase, report: Report) -> None:
    """Every assertion on a case's report, in-process or from a child."""
    where = f"[{report.profile}] {case.id} ({case.attempts})"
    failures: list[str] = []
    if report.outcome == "foreign":
        failures.append(f"execute raised a non-REPLError: {report.exc_types[0]}: {report.message}")
    if report.outcome == "error":
        why = _unreadable(report.message)
        if why:
            failures.append(f"unreadable REPLError ({why}): {report.message[:500]!r}")
    if case.expect == "refused" and report.outcome != "error":
        failures.append(f"expected a refusal, got {report.outcome}: {report.output[:300]!r}")
    failures += [f"ESCAPE: {e}" for e in report.escapes]
    failures += [f"HOST STATE: {d}" for d in report.host_diff]
    failures += [f"AFTERWARDS: {p}" for p in report.problems]
    failures += _bound_failures(case, report)
    assert not failures, where + "\n  " + "\n  ".join(failures)


def _bound_failures(case: EscapeCase, report: Report) -> list[str]:
    limit = report.timeout + LOAD_SLACK
    timed_out = "REPLTimeoutError" in report.exc_types
    took = f"{report.elapsed:.2f} s"
    out: list[str] = []
    if case.bound == "static":
        if report.outcome != "error" or timed_out or report.cpu > STATIC_CPU or report.elapsed > LOAD_SLACK:
            out.append(
                f"not refused before computing: {report.outcome} {report.exc_types[:1]} in {took}, "
                f"{report.cpu:.2f} s CPU"
            )
        if "MemoryError" in report.message:
            out.append(
                f"the result was attempted (MemoryError), not refused by a size bound: {report.message!r}"
            )
    elif case.bound == "timeout":
        if not timed_out or report.elapsed > limit:
            out.append(f"expected REPLTimeoutError within {limit} s, got {report.exc_types[:1]} in {took}")
    elif case.bound in ("prompt", "recursion"):
        if report.outcome != "error" or report.elapsed > limit:
            out.append(f"expected a REPLError within {limit} s, got {report.outcome} in {took}")
        if case.bound == "recursion" and (timed_out or "recursion" not in report.message.lower()):
            out.append(f"expected a recursion error, got {report.message[:200]!r}")
    elif case.bound == "memory":
        if report.outcome != "error" or report.elapsed > limit:
            out.append(f"expected a REPLError within {limit} s, got {report.outcome} in {took}")
    elif case.bound == "output":
        bound = MAX_OUTPUT + _marker_len(MAX_OUTPUT, 10**12)
        if report.outcome != "ok" or len(report.output) > bound or "[Output truncated:" not in report.output:
            out.append(
                f"expected truncated output <= {bound} chars, got {report.outcome} "
                f"of {len(report.output)} chars: {report.message[:200]!r}"
            )
        if report.rss_delta_kb > 20 * 1024:
            out.append(f"peak memory grew by {report.rss_delta_kb // 1024} MB while printing")
        if report.elapsed > limit:
            out.append(f"the flood took {took}")
    elif case.bound == "gc" and report.gc_elapsed > LOAD_SLACK:
        out.append(f"dropping the env ran sandboxed code for {report.gc_elapsed:.1f} s")
    elif case.bound == "process" and (report.outcome != "error" or report.elapsed > limit):
        out.append(f"expected a REPLError within {limit} s, got {report.outcome} in {took}")
    return out


# ------------------------------------------------------------------------------ the tests

_INLINE = [c for c in CORPUS if c.bound is None]
_BOUNDED = [c for c in CORPUS if c.bound is not None]


def test_corpus_shape() -> None:
    """The corpus is large, unique and covers every category the issue lists."""
    assert len(CORPUS) >= 60
    assert len(BY_ID) == len(CORPUS)
    assert {c.category for c in CORPUS} == set(CATEGORIES)
    for case in CORPUS:
        assert case.code.strip() and case.attempts.strip(), case.id
        assert case.bound is None or case.category == "resource_bomb" or case.bound in ("prompt", "gc")
        compile(case.code, case.id, "exec")  # every snippet is valid Python: refusals are the sandbox's


@pytest.fixture
def in_tmp_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("case", _INLINE, ids=[c.id for c in _INLINE])
def test_escape_contained(
    case: EscapeCase, profile: str, in_tmp_cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    saved = _save_host()
    try:
        report = _run_bounded(
            lambda: run_case(case, profile, timeout=INLINE_TIMEOUT), INLINE_TIMEOUT + 2 * LOAD_SLACK
        )
    finally:
        _restore_host(saved)
    leaked = capsys.readouterr()
    check_report(case, report)
    assert leaked.out == "", (
        f"[{profile}] {case.id}: sandboxed code wrote to the real stdout: {leaked.out[:300]!r}"
    )
    assert _HOST_SECRET not in leaked.err


# env_function_reused probes calling the function from a fresh env in this process; a worker's
# function is a stand-in for an object in that worker, so the probe itself cannot run there.
_PROCESS = [c for c in _INLINE if c.id != "env_function_reused"]


@pytest.mark.parametrize(
    ("case", "profile"), [pytest.param(c, p, id=f"{c.id}-{p}") for c, p in lean_pairs(_PROCESS, PROFILES)]
)
def test_escape_contained_in_process_isolation(
    case: EscapeCase, profile: str, in_tmp_cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every inline case in a worker process too, both profiles (on the lean runs of .ci/run, one
    profile per case in turn): the worker's guards refuse them as the inline ones do (defence in
    depth behind the process boundary), the host is untouched."""
    capsys.readouterr()
    saved = _save_host()
    try:
        report = _run_bounded(
            lambda: run_case(case, profile, timeout=INLINE_TIMEOUT, isolation="process"),
            INLINE_TIMEOUT + 2 * LOAD_SLACK,
        )
    finally:
        _restore_host(saved)
    assert report.outcome != "unsupported", report.message
    check_report(case, report)
    assert capsys.readouterr().out == ""


def _run_child(case: EscapeCase, profile: str, cwd: Path) -> tuple[Report, str]:
    limit = CHILD_TIMEOUT + 3 * LOAD_SLACK
    # the child is this file run as a script: tests/ (escape_corpus) goes on its path
    tests = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=path)
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", case.id, profile],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"[{profile}] {case.id}: the child did not finish within {limit:.0f} s "
            "(the bomb was not bounded; the child was killed)"
        )
    lines = proc.stdout.splitlines()
    reports = [ln for ln in lines if ln.startswith(REPORT_PREFIX)]
    if proc.returncode != 0 or not reports:
        pytest.fail(
            f"[{profile}] {case.id}: child exited {proc.returncode}\n"
            f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-3000:]}"
        )
    data = json.loads(reports[-1][len(REPORT_PREFIX) :])
    leaked = "\n".join(ln for ln in lines if not ln.startswith(REPORT_PREFIX))
    return Report(**data), leaked


@pytest.mark.parametrize(
    ("case", "profile"),
    [pytest.param(c, p, id=f"{c.bound}-{c.id}-{p}") for c, p in profile_pairs(_BOUNDED, PROFILES)],
)
def test_bomb_bounded(case: EscapeCase, profile: str, tmp_path: Path) -> None:
    report, leaked = _run_child(case, profile, tmp_path)
    if report.outcome == "unsupported":
        pytest.skip(
            f"{case.id} needs isolation='process' (a single long C call cannot be "
            f"interrupted inline), which this executor does not offer: {report.message}"
        )
    check_report(case, report)
    assert leaked == "", f"[{profile}] {case.id}: sandboxed code wrote to the real stdout: {leaked[:300]!r}"


def test_refusal_messages_name_the_allowlist() -> None:
    """Profile fixed: a refused import says what *is* allowed, so the model can recover."""
    executor = REPLExecutor(timeout=INLINE_TIMEOUT, profile="fixed")
    with pytest.raises(REPLError) as info:
        executor.execute("import os", make_env())
    message = str(info.value)
    assert "os" in message
    for allowed in ("re", "json", "math", "collections", "itertools"):
        assert allowed in message, message


def test_timeout_error_is_a_repl_error() -> None:
    assert issubclass(REPLTimeoutError, REPLError)


def _child_main(case_id: str, profile: str) -> None:
    """Entry point of the child process: run one bounded case and print its report as JSON."""
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))
    case = BY_ID[case_id]
    isolation = "process" if case.bound == "process" else "inline"
    report = run_case(case, profile, timeout=CHILD_TIMEOUT, isolation=isolation)
    out = sys.__stdout__
    assert out is not None
    out.write(REPORT_PREFIX + json.dumps(dataclasses.asdict(report)) + "\n")
    out.flush()
    os._exit(0)  # skip interpreter teardown: hostile finalisers must not run after the report


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child_main(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: test_sandbox_escapes.py --child CASE_ID PROFILE")
