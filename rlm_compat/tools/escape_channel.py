"""Escape-assumed tests of the channel: what an escaped worker can do to its *parent*.

:mod:`.escape_assumed` asks what an escaped worker can reach outside itself; this module asks
what it can do through the one door it must keep, its channel to the parent. Each attack is
plain Python run as a step of a REPL worker started with the escaped entry
(:func:`rlm_compat.sandbox.isolate.escapehook.serve_repl`): it holds the worker's channel and
sends its parent whatever frames it likes (``CHANNEL``, ``SEQ``, ``send_raw``, ``wire``, ``ns``).

An attack is **stopped** when the parent stays up and in time, ends the attack the way the
attack's ``expect`` says (a :class:`~rlm_compat.errors.REPLWorkerFaultError`, naming the limit
where one is given; a timeout; a cap that held), and then runs an ordinary step both in the same
runner and in a new one. Anything else — an answer accepted past its cap, an exception from
inside the runner, a step that outlives its deadline — is *not stopped*.

``rlm-compat doctor --escape-assumed`` runs :data:`CORPUS` in a child process (a parent that
dies — the SIGSEGV class — is reported, not shared); the tests run it in process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["CORPUS", "ChannelAttack", "ChannelVerdict", "run_attack", "run_corpus", "run_in_child"]

TIMEOUT = 2.0
"""The attacks' step timeout (seconds)."""
ANSWER_CHARS = 1000
OUTPUT_CHARS = 2000
TEXT_CAP = OUTPUT_CHARS + (64 << 10) + 100
"""The longest step text a parent may hand on (``max_output_chars`` + the documented 64 KiB for
error messages and notes + the cut marker), whatever the worker sent."""
LATE = 10.0
"""Seconds past the step's deadline after which an attack counts as a hang (the half-second
kill grace and a loaded machine's slack are well inside it)."""


@dataclasses.dataclass(frozen=True)
class ChannelAttack:
    """One attack: ``name`` (stable id), its ``kind`` (the class of the issue it stands for),
    what it ``tried``, its escaped ``code``, and what stopping it looks like: ``expect`` is
    ``"fault"`` (optionally naming ``limit``), ``"fault_next"`` (the following step meets the
    fault: a reply sent out of turn), ``"timeout"``, ``"no_answer"`` (FINAL / FINAL_VAR not
    taken), ``"text_capped"`` or ``"type_capped"``."""

    name: str
    kind: str
    tried: str
    code: str
    expect: str
    limit: str | None = None


@dataclasses.dataclass(frozen=True)
class ChannelVerdict:
    attack: ChannelAttack
    stopped: bool
    how: str
    seconds: float

    def line(self) -> str:
        status = "stopped" if self.stopped else "NOT STOPPED"
        return f"{self.attack.name}: {self.attack.tried} — {status} ({self.how})"


_DONE = (
    'DONE = {"op": "done", "result": {"ok": True, "text": "ok"}, "values": {}, "removed": [], '
    '"aliases": {}, "unloadable": {}, "checked": []}\n'
)
_DEQUE_OF_RANGE = b"\x93\xc7\x01\x01\x07\x00\x94\xc7\x01\x01\x0a\x00"
"""[deque marker, maxlen 0, [range marker, 0, ...]]: the stop, the step and the close follow."""


def _a(name: str, kind: str, tried: str, expect: str, code: str, limit: str | None = None) -> ChannelAttack:
    return ChannelAttack(name, kind, tried, "#escaped\n" + _DONE + code.strip() + "\n", expect, limit)


def _value(data: str) -> str:
    """Code sending a done reply whose variable ``v`` is the bytes ``data`` evaluates to."""
    return f'CHANNEL.send({{**DONE, "values": {{"v": ["list", False, {data}]}}}})'


CORPUS: tuple[ChannelAttack, ...] = (
    _a(
        "deep-frame",
        "crash",
        "a reply nested 150,000 levels deep",
        "fault",
        'send_raw(b"\\x91" * 150_000 + b"\\x90")',
        "depth",
    ),
    _a(
        "deep-tuple-key",
        "crash",
        "a dict key that is a tuple nested 150,000 deep (hashed while decoding)",
        "fault",
        _value('b"\\x81" + b"\\x92\\xc7\\x01\\x01\\x01" * 150_000 + b"\\x90\\xc0"'),
        "depth",
    ),
    _a(
        "deep-value",
        "crash",
        "a value nested 200 deep (under the decoder's stack, over the tree's depth)",
        "fault",
        _value('b"\\x91" * 200 + b"\\x90"'),
        "depth",
    ),
    _a(
        "deque-of-range",
        "freeze",
        "deque(range(2**62), 0): a constructor fed a lazy iterable",
        "fault",
        _value(f"{_DEQUE_OF_RANGE!r} + b'\\xcf' + (2**62).to_bytes(8, 'big') + b'\\x01'"),
    ),
    _a(
        "pickle-with-references",
        "freeze",
        "an old-format pickle whose tuple repeats one reference 40 levels deep",
        "fault",
        "import pickle\nx = ()\nfor _ in range(40):\n    x = (x, x)\n"
        "data = pickle.dumps({'op': 'done', 'seq': SEQ, 'x': x})\nsend_raw(data)",
    ),
    _a(
        "array-claim",
        "memory",
        "an array header announcing 4 billion items in a 5-byte message",
        "fault",
        'send_raw(b"\\xdd\\xff\\xff\\xff\\xff")',
    ),
    _a(
        "bytes-claim",
        "memory",
        "a bin32 header announcing 2 GB in a 5-byte value",
        "fault",
        _value('b"\\xc6\\x77\\x35\\x94\\x00"'),
    ),
    _a(
        "item-flood",
        "memory",
        "5,000,000 small ints in 5,000 lists (5 MB: 40 MB of pointers and more once built)",
        "fault",
        _value('b"\\xdd" + (5000).to_bytes(4, "big") + (b"\\xdc\\x03\\xe8" + b"\\x00" * 1000) * 5000'),
        "items",
    ),
    _a(
        "big-int",
        "memory",
        "an int of a million bytes (quadratic to print, slow to hash or divide)",
        "fault",
        _value('b"\\xc9" + (1 << 20).to_bytes(4, "big") + b"\\x02" + b"\\x7f" * (1 << 20)'),
        "int_bytes",
    ),
    _a(
        "final-over-cap",
        "caps",
        f"FINAL with a text 50 times answer_chars ({ANSWER_CHARS})",
        "no_answer",
        f'payload = wire.encode([["x" * {50 * ANSWER_CHARS}], {{}}])\n'
        'CHANNEL.send({"op": "call", "name": "FINAL", "payload": payload})\n'
        "reply = CHANNEL.recv()\nCHANNEL.send({**DONE, 'result': {'ok': True, 'text': reply['op']}})",
    ),
    _a(
        "final-var-long-name",
        "caps",
        "FINAL_VAR with a 100,000-character name and text",
        "no_answer",
        'payload = wire.encode([["n" * 100_000, "t"], {}])\n'
        'CHANNEL.send({"op": "call", "name": "FINAL_VAR", "payload": payload})\n'
        "reply = CHANNEL.recv()\nCHANNEL.send({**DONE, 'result': {'ok': True, 'text': reply['op']}})",
    ),
    _a(
        "text-over-cap",
        "caps",
        f"a step text of 1,000,000 characters with max_output_chars={OUTPUT_CHARS}",
        "text_capped",
        'CHANNEL.send({**DONE, "result": {"ok": False, "text": "e" * 1_000_000}})',
    ),
    _a(
        "type-name-flood",
        "caps",
        "a kept variable whose type name is 1,000,000 characters",
        "type_capped",
        'CHANNEL.send({**DONE, "values": {"v": ["T" * 1_000_000, True, b""]}})',
    ),
    _a(
        "host-call-flood",
        "deadline",
        f"host calls with 8 MB arguments, for ever, in a step with a {TIMEOUT:g} s timeout",
        "timeout",
        'payload = wire.encode([["p" * (8 << 20)], {}])\nwhile True:\n'
        '    CHANNEL.send({"op": "call", "name": "noop", "payload": payload})\n    CHANNEL.recv()',
    ),
    _a(
        "non-str-keys",
        "shape",
        "a variable whose name is an int",
        "fault",
        'CHANNEL.send({**DONE, "values": {1: ["int", False, wire.encode(1)]}})',
    ),
    _a(
        "wrong-types",
        "shape",
        "a result whose ok is a str",
        "fault",
        'CHANNEL.send({**DONE, "result": {"ok": "yes", "text": 1}})',
    ),
    _a(
        "unknown-op",
        "shape",
        "a reply with an op the parent never asked for",
        "fault",
        'CHANNEL.send({"op": "explode"})',
    ),
    _a(
        "standin-argument",
        "shape",
        "a host call whose argument is a stand-in for a worker object",
        "fault",
        'CHANNEL.send({"op": "call", "name": "noop", "payload": wire.encode_value([[lambda: 0], {}])[0]})\n'
        "CHANNEL.recv()\nCHANNEL.send(DONE)",
    ),
    _a(
        "second-reply",
        "protocol",
        "two replies to one step (the second would answer the next)",
        "fault_next",
        "CHANNEL.send(DONE)\nCHANNEL.send({**DONE, 'result': {'ok': True, 'text': 'forged'}})",
    ),
)


class _Box:
    def __init__(self) -> None:
        self.answers: list[Any] = []

    def final(self, text: Any) -> None:
        self.answers.append(text)

    def final_var(self, name: Any, text: Any) -> None:
        self.answers.append((name, text))


def _env(box: _Box) -> dict[str, Any]:
    from ..sandbox import host_call

    return {
        "FINAL": host_call(box.final, "answer"),
        "FINAL_VAR": host_call(box.final_var, "answer_var"),
        "noop": host_call(lambda *args, **kwargs: None),
    }


def _runner() -> Any:
    from ..config import Limits, ReplConfig
    from ..sandbox import ProcessRunner

    config = ReplConfig(
        timeout=TIMEOUT,
        max_output_chars=OUTPUT_CHARS,
        isolation="process",
        limits=Limits(answer_chars=ANSWER_CHARS),
    )
    return ProcessRunner(config, state="worker", entry="escaped")


def _judge(attack: ChannelAttack, runner: Any, env: dict[str, Any], box: _Box) -> tuple[bool, str]:
    from ..errors import REPLError, REPLTimeoutError, REPLWorkerFaultError

    try:
        text = runner.execute(attack.code, env)
        if attack.expect == "fault_next":
            text = runner.execute("print('next')", env)
    except REPLWorkerFaultError as exc:
        if attack.expect not in ("fault", "fault_next"):
            return False, f"unexpected worker fault: {str(exc)[:120]}"
        if attack.limit is not None and exc.limit != attack.limit:
            return False, f"a fault naming limit {exc.limit!r}, not {attack.limit!r}"
        return True, f"REPLWorkerFaultError{f' (limit {exc.limit})' if exc.limit else ''}"
    except REPLTimeoutError:
        return attack.expect == "timeout", "REPLTimeoutError, the worker replaced"
    except REPLError as exc:
        if attack.expect != "text_capped":
            return False, f"{type(exc).__name__}: {str(exc)[:120]}"
        text = str(exc)
    except Exception as exc:
        return False, f"{type(exc).__name__}: {str(exc)[:120]}"
    if attack.expect == "no_answer":
        return not box.answers, "the host refused the answer" if not box.answers else "ANSWER TAKEN"
    if attack.expect == "text_capped":
        return len(text) <= TEXT_CAP, f"the step's text cut to {len(text)} characters"
    if attack.expect == "type_capped":
        shown = getattr(env.get("v"), "type_name", "")
        return 0 < len(shown) <= 200, f"the type name cut to {len(shown)} characters"
    return False, f"the step ended normally: {text[:80]!r}"


def _works(runner: Any, env: dict[str, Any]) -> bool:
    try:
        return bool(runner.execute("print(6 * 7)", env) == "42")
    except Exception:
        return False


def run_attack(attack: ChannelAttack) -> ChannelVerdict:
    """Run one attack against a real parent (this process) and judge it."""
    box = _Box()
    runner = _runner()
    env = _env(box)
    started = time.monotonic()
    try:
        stopped, how = _judge(attack, runner, env, box)
        seconds = time.monotonic() - started
        if seconds > TIMEOUT * (2 if attack.expect == "fault_next" else 1) + LATE:
            stopped, how = False, f"{how}, but only after {seconds:.1f} s"
        if not _works(runner, env):
            stopped, how = False, f"{how}; the same runner failed afterwards"
        fresh = _runner()
        try:
            if not _works(fresh, _env(_Box())):
                stopped, how = False, f"{how}; a new runner failed afterwards"
        finally:
            fresh.close()
    finally:
        runner.close()
    return ChannelVerdict(attack, stopped, how, seconds)


def run_corpus(attacks: Sequence[ChannelAttack] = CORPUS) -> list[ChannelVerdict]:
    return [run_attack(attack) for attack in attacks]


def run_in_child(attacks: Sequence[ChannelAttack] = CORPUS) -> list[ChannelVerdict]:
    """Each attack in a child process of its own, so a parent that dies is a verdict, not the end."""
    verdicts = []
    for attack in attacks:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "rlm_compat.tools.escape_channel", attack.name],
            capture_output=True,
            text=True,
            env={**os.environ},
            timeout=TIMEOUT * 2 + LATE * 3,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode == 0 and lines:
            result = json.loads(lines[-1])
            verdicts.append(
                ChannelVerdict(attack, bool(result["stopped"]), str(result["how"]), result["seconds"])
            )
        else:
            how = f"the parent process ended without a verdict (exit status {done.returncode})"
            verdicts.append(ChannelVerdict(attack, False, how, time.monotonic() - started))
    return verdicts


def _main(names: Sequence[str]) -> int:
    chosen = [attack for attack in CORPUS if attack.name in names]
    if len(chosen) != len(names):
        print(f"unknown attacks: {sorted(set(names) - {a.name for a in chosen})}", file=sys.stderr)
        return 3
    for verdict in run_corpus(chosen):
        print(
            json.dumps(
                {
                    "name": verdict.attack.name,
                    "stopped": verdict.stopped,
                    "how": verdict.how,
                    "seconds": verdict.seconds,
                }
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
