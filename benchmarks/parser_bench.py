"""Time the fixed parser and the upstream-exact functions on adversarial responses.

    python benchmarks/parser_bench.py [--size 1000000] [--repeat 3] [--timeout 60]

Each cell is the best of ``--repeat`` runs, measured in a child process so a pathological case
(regex backtracking, a quadratic rescan) shows up as ``> timeout`` instead of hanging the table.
The fixed parser must stay linear: every input here should parse well under a second at 1 MB.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

from rlm_compat import parser

_ENV: dict[str, Any] = {"answer": "A", "x": 1, "context": "c", "query": "q"}


def _fill(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def inputs(size: int) -> dict[str, str]:
    """Named responses of about ``size`` characters."""
    prose = _fill("It's a long answer (see below); don't stop, \"quote\" and 'quote'. ", size)
    return {
        'FINAL(" repeated': _fill('FINAL("', size),
        'FINAL("\\n repeated': _fill('FINAL("\n', size),
        'FINAL(""" repeated': _fill('FINAL("""', size),
        "FINAL(''' lines": _fill("FINAL('''\n", size),
        "FINAL( repeated": _fill("FINAL(", size),
        "FINAL_VAR( repeated": _fill("FINAL_VAR(", size),
        "FINAL_VAR(  x  spaces": "FINAL_VAR(" + " " * size + "x",
        "open parens": "FINAL(" + "(" * size,
        "long prose, no directive": prose,
        "prose, directive at the end": prose + '\nFINAL("done")',
        "mid-line examples": _fill('use FINAL("x") or FINAL_VAR(y) later; ', size),
        "many complete directives": _fill('FINAL("a")\n', size),
        "1 MB answer": 'FINAL("' + "a" * size + '")',
        "fenced code, FINAL last": "```python\n"
        + _fill("x = f(1, '2', \"3\")  # c\n", size)
        + 'FINAL("done")\n```',
        "unclosed fence of strings": "```python\n" + _fill("s = '''\n", size),
    }


def _functions() -> dict[str, Callable[[str], object]]:
    return {
        "resolve_final (fixed)": lambda text: parser.resolve_final(text, _ENV),
        "extract_final": parser.extract_final,
        "extract_final_var": lambda text: parser.extract_final_var(text, _ENV),
        "is_final": parser.is_final,
        "parse_response": lambda text: parser.parse_response(text, _ENV),
    }


def _measure(name: str, function: str, size: int, repeat: int, out: Any) -> None:
    text = inputs(size)[name]
    call = _functions()[function]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call(text)
        best = min(best, time.perf_counter() - start)
    out.send(best)


def _timed(name: str, function: str, size: int, repeat: int, timeout: float) -> str:
    receive, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.Process(target=_measure, args=(name, function, size, repeat, send))
    child.start()
    if not receive.poll(timeout):
        child.kill()
        child.join()
        return f"> {timeout:g} s"
    seconds: float = receive.recv()
    child.join()
    return f"{seconds * 1000:.1f} ms"


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--size", type=int, default=1_000_000, help="characters per input")
    options.add_argument("--repeat", type=int, default=3, help="runs per cell (best is shown)")
    options.add_argument("--timeout", type=float, default=60.0, help="seconds per cell")
    args = options.parse_args()
    functions = list(_functions())
    print(f"size {args.size:,} characters, best of {args.repeat}\n")
    print("| input | " + " | ".join(functions) + " |")
    print("|---" * (len(functions) + 1) + "|")
    for name in inputs(args.size):
        cells = [_timed(name, f, args.size, args.repeat, args.timeout) for f in functions]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
