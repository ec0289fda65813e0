"""Sessions (executors) never touch each other or the host, even inline.

Code of one session may run while another session's step is running: a generator of session A
finalized there (the host dropped A's env, or the garbage collector ran), or a function of A the
host put into B's env. It must not print into B's output, see B's names or reseed B's random.
Sandboxed regular expressions must not evict the host's ``re`` cache, and sandboxed warnings must
not reach the host's stderr, filters or registries.
"""

from __future__ import annotations

import gc
import random
import re
import subprocess
import sys
import textwrap
import threading
import warnings
from typing import Any

import pytest

from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox import host_call

PROFILES = ["fixed", "upstream"]


def _random_import(profile: str) -> str:
    """``random`` is imported in profile fixed and a predefined name in profile upstream."""
    return "import random\n" if profile == "fixed" else ""


def _generator_source(profile: str, tag: str) -> str:
    reveal = "print('leak', dir())\n        " if profile == "fixed" else ""
    return _random_import(profile) + textwrap.dedent(f"""\
        def gen():
            try:
                yield 1
            finally:
                print('{tag} finally')
                {reveal}random.seed(12345)
        """)


def _suspended_generator(ex: REPLExecutor, profile: str) -> dict[str, Any]:
    env: dict[str, Any] = {}
    ex.execute(_generator_source(profile, "A") + "g = gen()\nfirst = next(g)", env)
    return env


def _expected_b(seed: int = 7) -> str:
    return f"B {random.Random(seed).random()}"


def _b_step(profile: str) -> str:
    return _random_import(profile) + "random.seed(7)\nsecret_b = 1\ndrop()\nprint('B', random.random())"


@pytest.mark.parametrize("profile", PROFILES)
def test_generator_finalized_during_another_sessions_step(profile: str) -> None:
    ex_a, ex_b = REPLExecutor(profile=profile), REPLExecutor(profile=profile)
    env_a = _suspended_generator(ex_a, profile)

    def drop() -> None:
        env_a.clear()
        gc.collect()

    env_b: dict[str, Any] = {"drop": host_call(drop)}
    assert ex_b.execute(_b_step(profile), env_b) == _expected_b()


@pytest.mark.parametrize("profile", PROFILES)
def test_generator_finalized_in_another_thread_during_its_step(profile: str) -> None:
    ex_a, ex_b = REPLExecutor(profile=profile), REPLExecutor(profile=profile)
    env_a = _suspended_generator(ex_a, profile)
    out: list[str] = []

    def drop() -> None:
        env_a.clear()
        gc.collect()

    def run_b() -> None:
        out.append(ex_b.execute(_b_step(profile), {"drop": host_call(drop)}))

    t = threading.Thread(target=run_b)
    t.start()
    t.join()
    assert out == [_expected_b()]


@pytest.mark.parametrize("profile", PROFILES)
def test_generator_moved_into_another_session_and_dropped_there(profile: str) -> None:
    ex_a, ex_b = REPLExecutor(profile=profile), REPLExecutor(profile=profile)
    env_a = _suspended_generator(ex_a, profile)
    env_b: dict[str, Any] = {"g": env_a.pop("g")}
    code = _random_import(profile) + "random.seed(7)\nsecret_b = 1\ng = None\nprint('B', random.random())"
    assert ex_b.execute(code, env_b) == _expected_b()


@pytest.mark.parametrize("profile", PROFILES)
def test_generator_closed_in_its_own_session_still_cleans_up(profile: str) -> None:
    ex = REPLExecutor(profile=profile)
    env = _suspended_generator(ex, profile)
    out = ex.execute("g.close()\nr = random.random()", env)
    assert out == "Code executed successfully (no output)" or "A finally" in out
    assert env["r"] == random.Random(12345).random()


@pytest.mark.parametrize("profile", PROFILES)
def test_function_of_one_session_called_in_another(profile: str) -> None:
    ex_a, ex_b = REPLExecutor(profile=profile), REPLExecutor(profile=profile)
    env_a: dict[str, Any] = {}
    reveal = "    print('leak', dir())\n" if profile == "fixed" else ""
    ex_a.execute(
        _random_import(profile)
        + "def f():\n    print('A says hi')\n"
        + reveal
        + "    random.seed(99)\n    return 5",
        env_a,
    )
    env_b: dict[str, Any] = {"f": env_a["f"]}
    code = _random_import(profile) + "random.seed(7)\nsecret_b = 1\nv = f()\nprint('B', random.random(), v)"
    assert ex_b.execute(code, env_b) == _expected_b() + " 5"
    if profile == "fixed":  # in its own session the function still prints
        assert ex_a.execute("v = f()", env_a) == "A says hi\nleak ['f', 'random']"


@pytest.mark.parametrize("profile", PROFILES)
def test_host_calling_sandboxed_code_outside_any_step(profile: str) -> None:
    ex = REPLExecutor(profile=profile)
    env: dict[str, Any] = {}
    ex.execute(
        _random_import(profile)
        + "random.seed(3)\ndef f():\n    print('x')\n    random.seed(4)\n    return 1",
        env,
    )
    assert env["f"]() == 1
    ex.execute("r = random.random()", env)
    assert env["r"] == random.Random(3).random()


@pytest.mark.parametrize("profile", PROFILES)
def test_two_sessions_in_two_threads_with_cross_finalizers(profile: str) -> None:
    steps = 30
    barrier = threading.Barrier(2)
    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def work(tag: str) -> None:
        try:
            ex = REPLExecutor(profile=profile)
            # The steps' cycles are young (gc is off), so a generation-0 collection finds them; a
            # full one would walk the whole pytest process, ~0.5 s a call in a full run.
            env: dict[str, Any] = {"collect": host_call(lambda: gc.collect(0))}
            ex.execute(_generator_source(profile, tag) + f"name_{tag} = 1", env)
            barrier.wait()
            outs = []
            for step in range(steps):
                code = (
                    _random_import(profile)
                    + "box = [gen()]\nnext(box[0])\nbox.append(box)\nbox = None\n"
                    + "collect()\n"
                    + f"random.seed({step})\n"
                    + f"for i in range(50):\n    print('{tag}')\n"
                    + "print(random.random())"
                )
                outs.append(ex.execute(code, env))
            results[tag] = outs
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(tag,)) for tag in ("A", "B")]
    gc.disable()  # garbage is collected only in the steps' collect() calls
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.enable()
    assert not errors
    for tag, outs in results.items():
        for step, out in enumerate(outs):
            lines = out.split("\n")
            cleanup = [ln for ln in lines if ln == f"{tag} finally" or ln.startswith("leak")]
            body = [ln for ln in lines if ln not in cleanup]
            assert body == [tag] * 50 + [str(random.Random(step).random())], (tag, step, out)
            assert all(f"name_{tag}" in ln for ln in cleanup if ln.startswith("leak"))


# --- the host's re cache ----------------------------------------------------------------------


def _host_re_caches() -> list[dict[Any, Any]]:
    return [getattr(re, name) for name in ("_cache", "_cache2") if hasattr(re, name)]


@pytest.mark.parametrize("profile", PROFILES)
def test_sandboxed_regex_leaves_the_host_re_cache_alone(profile: str) -> None:
    executor = REPLExecutor(profile=profile)
    # the host's own first-use imports (textwrap, tokenize: their module-level patterns) happen
    # here, so the comparison below sees only what the sandboxed code could have added
    executor.execute("re.match('warm', 'x')", {})
    for thread in threading.enumerate():  # an RLM made by an earlier test imports litellm meanwhile
        if thread.name == "rlm-compat-import":
            thread.join(120)
    for i in range(20):
        re.match(f"host-pattern-{i}", "x")
    before = [dict(c) for c in _host_re_caches()]
    code = textwrap.dedent("""\
        n = 0
        for i in range(1000):
            p = "rlmcsbx%d[a-z]*" % i
            if re.match(p, 'rlmcsbx1abc'):
                n = n + 1
            re.search(p, 'x')
            re.fullmatch(p, 'x')
            re.findall(p, 'x')
            re.sub(p, '', 'x')
            re.split(p, 'x')
            re.compile(p + 'z')
            re.compile(p, re.I)
        print(n)
        """)
    assert executor.execute(code, {}) == "1"
    after = _host_re_caches()
    # nothing of the sandbox's thousands of patterns entered the host's caches, and the host's own
    # recent entries were neither evicted nor replaced; other threads of this test process may
    # still compile patterns of their own meanwhile (an import evicts the oldest entries)
    assert not [key for cache in after for key in cache if "rlmcsbx" in str(key)]
    ours = [{k: v for k, v in c.items() if "host-pattern" in str(k)} for c in before]
    assert any(ours)
    assert all(cache.get(k) is v for cache, mine in zip(after, ours, strict=True) for k, v in mine.items())


@pytest.mark.parametrize("profile", PROFILES)
def test_sandboxed_regex_behaves_like_re(profile: str) -> None:
    code = textwrap.dedent("""\
        p = re.compile(r'(\\w)(\\d)')
        print(re.compile(p) is p, re.sub(p, r'\\2\\1', 'a1 b2'), re.subn("a", "b", "aaa", 2))
        print(re.findall('(?i)X', 'xX'), [m.group() for m in re.finditer('a.', 'abac')])
        print(re.split(',', 'a,b,,c', maxsplit=2), re.match('A', 'a', re.IGNORECASE) is not None)
        try:
            re.compile(p, re.I)
        except ValueError as e:
            print('ValueError', e)
        try:
            re.compile('(')
        except re.error as e:
            print('error', e)
        """)
    out = REPLExecutor(profile=profile).execute(code, {})
    assert out.split("\n") == [
        "True 1a 2b ('bba', 2)",
        "['x', 'X'] ['ab', 'ac']",
        "['a', 'b', ',c'] True",
        "ValueError cannot process flags argument with a compiled pattern",
        "error missing ), unterminated subpattern at position 0",
    ]


def test_regex_debug_flag_does_not_write_to_the_host(capfd: pytest.CaptureFixture[str]) -> None:
    out = REPLExecutor().execute(
        "try:\n    re.compile('ab+', 128)\nexcept ValueError as e:\n    print('refused')", {}
    )
    assert out == "refused"
    assert capfd.readouterr() == ("", "")


# --- warnings ----------------------------------------------------------------------------------

_WARNING_SOURCES = (
    "x = re.compile('[[a]')",  # FutureWarning at run time
    "y = len('\\d{tag}')",  # invalid escape: DeprecationWarning (<3.12) / SyntaxWarning, at compile
    "z = 1 if 1 is 1 else 2",  # SyntaxWarning at compile time
)


def _warning_program(tag: str) -> str:
    return "\n".join(_WARNING_SOURCES).replace("{tag}", tag)


@pytest.mark.parametrize("profile", PROFILES)
def test_sandboxed_warnings_reach_neither_host_display_nor_env(profile: str) -> None:
    env: dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = REPLExecutor(profile=profile).execute(_warning_program(f"rec-{profile}"), env)
        warnings.warn("the host's own warning", UserWarning, stacklevel=1)
    assert out == "Code executed successfully (no output)"
    assert [str(w.message) for w in seen] == ["the host's own warning"]
    assert not [k for k in env if "warning" in k]


@pytest.mark.parametrize("profile", PROFILES)
def test_host_error_filter_does_not_turn_sandbox_warnings_into_errors(profile: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = REPLExecutor(profile=profile).execute(_warning_program(f"err-{profile}"), {})
        with pytest.raises(UserWarning):
            warnings.warn("host", UserWarning, stacklevel=1)
    assert out == "Code executed successfully (no output)"


def test_host_warnings_from_another_thread_keep_working_during_steps() -> None:
    stop = threading.Event()

    def sandbox_loop() -> None:
        ex = REPLExecutor()
        while not stop.is_set():
            ex.execute("x = re.compile('[[a]')\nfor i in range(100):\n    pass", {})

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = threading.Thread(target=sandbox_loop)
        t.start()
        try:
            for i in range(300):
                warnings.warn(f"host {i}", UserWarning, stacklevel=1)
        finally:
            stop.set()
            t.join()
    assert [str(w.message) for w in seen] == [f"host {i}" for i in range(300)]


_SCRIPT = """
import sys, warnings
from rlm_compat.repl import REPLExecutor
env = {}
for profile in ("fixed", "upstream"):
    out = REPLExecutor(profile=profile).execute(sys.argv[1].replace("{tag}", profile), env)
    assert out == "Code executed successfully (no output)", out
warnings.warn("host-side warning", UserWarning)
print(sorted(k for k in env if k.startswith("__")))
"""


@pytest.fixture(autouse=True)
def _inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the inline runner's own mechanisms (the watchdog, sessions sharing a
    process); REPLExecutor's default is a worker process. test_sandbox_process covers that one."""
    monkeypatch.setenv("RLM_COMPAT_ISOLATION", "inline")


@pytest.mark.parametrize("flag", ["always", "error::SyntaxWarning"])
def test_sandboxed_warnings_never_reach_host_stderr(flag: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-W", flag, "-c", _SCRIPT, "\n".join(_WARNING_SOURCES)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    if flag == "always":
        assert "host-side warning" in proc.stderr
    assert "nested set" not in proc.stderr and "escape" not in proc.stderr
    assert "literal" not in proc.stderr
