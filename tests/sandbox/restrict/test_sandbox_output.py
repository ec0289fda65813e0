"""Output capture: per execution and per thread, prints in functions, the cap, stale prints."""

from __future__ import annotations

import sys
import threading
import tracemalloc

import pytest

from rlm_compat.errors import REPLError
from rlm_compat.profiles import Profile
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.restrict.output import CappedText


def test_eight_executors_in_eight_threads_see_only_their_own_prints() -> None:
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(n: int) -> None:
        try:
            ex = REPLExecutor(profile="fixed" if n % 2 else "upstream")
            env: dict = {"n": n}
            barrier.wait()
            outs = []
            for step in range(20):
                code = f"for i in range(200):\n    print('t{n}')\nprint('step', {step})"
                outs.append(ex.execute(code, env))
            results[n] = outs
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n, outs in results.items():
        for step, out in enumerate(outs):
            lines = out.split("\n")
            assert set(lines[:-1]) == {f"t{n}"} and len(lines) == 201
            assert lines[-1] == f"step {step}"


def test_process_stdout_is_not_touched(capsys: pytest.CaptureFixture[str]) -> None:
    before = sys.stdout
    assert REPLExecutor().execute("print('inside')", {}) == "inside"
    assert sys.stdout is before
    assert capsys.readouterr().out == ""


def test_prints_inside_functions_in_fixed() -> None:
    """Profile upstream loses them as 2fb46cc does: repl.printing.* and repl.upstream_parity.print_in_func
    are recorded from the checkout and replayed by the conformance run."""
    ex = REPLExecutor()
    env: dict = {}
    ex.execute("def shout(x):\n    print('got', x)\n    return None", env)
    assert ex.execute("shout(1)\nshout(2)", env) == "got 1\ngot 2"


def test_prints_in_lambdas_comprehensions_and_methods_are_captured_in_fixed() -> None:
    code = (
        "f = lambda v: print('l', v)\nf(1)\n[print('c', i) for i in range(2)]\n"
        "class A:\n    def hi(self):\n        print('m')\nA().hi()"
    )
    assert REPLExecutor().execute(code, {}) == "l 1\nc 0\nc 1\nm"


def test_no_stale_prints_in_fixed() -> None:
    """2fb46cc repeats earlier prints and leaves ``_print`` in env; profile upstream's replay of that
    is checked against the recording (repl.upstream_parity.stale_print, tests/test_repl_upstream_parity.py)."""
    ex = REPLExecutor()
    env: dict = {}
    assert ex.execute("print('a')", env) == "a"
    assert ex.execute("y = 2", env) == "Code executed successfully (no output)"
    assert "_print" not in env


def test_print_functions_switch_alone() -> None:
    ex = REPLExecutor(profile=Profile.upstream().replace(print_in_functions_lost=False))
    env: dict = {}
    ex.execute("def f():\n    print('in f')", env)
    assert ex.execute("f()\nprint('top')", env) == "in f\ntop"


def test_print_keywords() -> None:
    ex = REPLExecutor()
    assert ex.execute("print(1, 2, sep='-', end='!')\nprint()", {}) == "1-2!"
    code = (
        "class Sink:\n    def __init__(self):\n        self.parts = []\n"
        "    def write(self, s):\n        self.parts.append(s)\n"
        "s = Sink()\nprint('x', file=s)\nprint(s.parts)"
    )
    assert ex.execute(code, {}) == "['x', '\\n']"
    with pytest.raises(REPLError):
        ex.execute("print('x', sep=3)", {})


def test_print_flood_keeps_memory_small() -> None:
    ex = REPLExecutor(timeout=30)
    code = "chunk = 'x' * 100000\nfor i in range(1000):\n    print(chunk)"
    tracemalloc.start()
    try:
        out = ex.execute(code, {})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.endswith("[Output truncated: 100001000 chars total, showing first 2000]")
    assert peak < 5_000_000


def test_capped_text_keeps_head_and_counts_everything() -> None:
    sink = CappedText(5)
    for piece in ["ab", "cdef", "gh"]:
        sink.write(piece)
    assert (sink.getvalue(), sink.total) == ("abcde", 8)
    other = CappedText(5)
    other.write("1234567")
    head = CappedText(5)
    head.write("z")
    head.extend(other)
    assert (head.getvalue(), head.total) == ("z1234", 8)
    with pytest.raises(TypeError):
        sink.write(b"x")  # type: ignore[arg-type]
