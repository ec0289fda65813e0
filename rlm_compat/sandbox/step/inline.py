"""The inline runner: model code runs in the calling thread, under the watchdog's deadline.

Used directly with ``isolation="inline"`` and, inside every worker process, as the engine the
worker drives (with no timeout of its own there: the parent kills the worker instead). One
``execute`` is: extract the code from the response, compile it restricted, run it with the
session's guards installed, and turn what happened into one observation text
(:class:`~.texts.Texts`). Everything that can run model-defined code — the program, the shown
last value, ``str()`` of a raised exception — runs inside the guarded region, so deadlines and
the memory guard cover it and nothing the code raises escapes as anything but a REPLError.
"""

from __future__ import annotations

import contextvars
import dis
import math
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...errors import (
    RAN_AND_FAILED,
    FinalVarMissingError,
    REPLError,
    REPLSecurityError,
    REPLTimeoutError,
    StepFailure,
)
from ...fences import describe_line
from ..restrict.context import LOCAL, ExecState, Session
from ..restrict.deadline import Deadline, run_with_deadline
from ..restrict.modules import proxy_for_module
from ..restrict.output import CappedText, PrintCollector
from ..restrict.policy import session_builtins
from ..restrict.prep import Compiled, Program, compile_program, extract, user_line
from ..restrict.transformer import CompileOptions
from ..restrict.violations import MemorySignal, SandboxViolation, TimeoutSignal
from .hostcall import bounded_str
from .repl_config import CONTEXT_ROOM, host_text_bytes
from .texts import NO_CODE, Texts

if TYPE_CHECKING:
    from .repl_config import ReplConfig

__all__ = ["InlineRunner", "is_real_interrupt"]


_DIRECTIVES = frozenset({"FINAL", "FINAL_VAR"})


def _is_directive(exc: BaseException) -> bool:
    """Whether the directive itself raised: its name undefined (no callable under ``minimal_env``)
    or the callable ``FINAL_VAR`` naming no variable."""
    if isinstance(exc, FinalVarMissingError):
        return True
    return type(exc) is NameError and getattr(exc, "name", None) in _DIRECTIVES


class _Failure:
    """What went wrong inside the guarded region, already rendered (rendering may run user code)."""

    __slots__ = ("error_type", "failure", "text")

    def __init__(self, error_type: type[REPLError], text: str, failure: StepFailure = RAN_AND_FAILED) -> None:
        self.error_type = error_type
        self.text = text
        self.failure = failure


class InlineRunner:
    """Runs steps of one or more sessions in the calling thread (see the module docstring)."""

    def __init__(self, config: ReplConfig, *, memory_guard: bool = True) -> None:
        self.config = config
        profile = config.profile
        self._texts = Texts(profile)
        self._options = CompileOptions.from_profile(profile)
        self._session = Session()
        self._contextvars = contextvars.Context()
        self._entered = False
        self._builtins = session_builtins(profile, self._session)
        self._hot = {k: self._builtins[k] for k in _HOT_NAMES if k in self._builtins}
        self._timeout = config.timeout
        memory_mb = config.limits.memory_mb if memory_guard else None
        self._memory_limit = None if memory_mb is None else memory_mb << 20

    def close(self) -> None:
        """Nothing to release: inline sessions hold no resources of their own."""

    def abort(self) -> None:
        """Nothing to kill: code in the calling thread stops only at its own deadline."""

    # --- one step ---------------------------------------------------------------------------

    def execute(self, code: str, env: dict[str, Any], *, timeout: float | None = None) -> str:
        """Run ``code`` (a model response; fences are handled) with ``env`` as its namespace."""
        program = extract(code, self._options.first_fence_only)
        if not program.source.strip():
            return NO_CODE
        compiled = compile_program(program.source, self._options)
        if compiled.code is None:
            issues = compiled.issues
            refused = any(i.kind == "policy" for i in issues)
            error_type = REPLSecurityError if refused else REPLError
            wheres = [describe_line(i.line, program.line_map, program.blocks) for i in issues]
            failure = StepFailure("policy" if refused else "syntax")
            raise error_type(self._texts.compile_error(issues, wheres), failure=failure)
        sink = CappedText(self.config.max_output_chars, strip=self.config.strip_output)
        outcome = self._guarded(
            env,
            sink,
            lambda namespace: self._run(compiled, program, namespace, env, sink),
            compiled,
            program,
            timeout,
        )
        if isinstance(outcome, _Failure):
            raise outcome.error_type(outcome.text, failure=outcome.failure)
        return self._texts.output(sink.getvalue(), sink.shown_total, self.config.max_output_chars)

    def render(self, env: dict[str, Any], name: str) -> str:
        """``str(env[name])`` for a final answer, under the step's deadline, memory guard and cap."""
        if name not in env:
            raise FinalVarMissingError(f"Variable '{name}' not found in REPL environment")
        sink = CappedText(0)
        box: list[str] = []

        def body(namespace: dict[str, Any]) -> _Failure | None:
            try:
                box.append(bounded_str(env[name], self.config.limits.answer_chars))
            except TimeoutSignal:
                raise
            except BaseException as exc:
                if is_real_interrupt(exc):
                    raise
                return self._failure(exc, None, None)
            return None

        failure = self._guarded(env, sink, body, None, None)
        if isinstance(failure, _Failure):
            raise failure.error_type(failure.text, failure=failure.failure)
        return box[0]

    # --- the guarded region -----------------------------------------------------------------

    def _guarded(
        self,
        env: dict[str, Any],
        sink: CappedText,
        body: Any,
        compiled: Compiled | None,
        program: Program | None,
        timeout: float | None = None,
    ) -> Any:
        """Install the session's guards in ``env``, run ``body`` under the deadline, restore."""
        seconds = self._timeout if timeout is None else min(timeout, self._timeout)
        memory = self._memory_limit
        if memory is not None:
            memory += CONTEXT_ROOM * host_text_bytes(env)
        deadline = Deadline(seconds, memory) if math.isfinite(seconds) or memory is not None else None
        state = ExecState(
            sink,
            self.config.max_output_chars,
            env,
            self._session,
            deadline,
            self.config.limits.answer_chars,
        )
        if self.config.profile.separate_scopes:
            namespace: dict[str, Any] = {"__builtins__": self._builtins}
        else:
            namespace = env
        saved = env.get("__builtins__", _ABSENT)
        previous = LOCAL.state
        LOCAL.state = state
        swapped = _proxy_modules(env)
        hot: dict[str, Any] = {}
        try:
            if namespace is env:
                env["__builtins__"] = self._builtins
                # Module-level code reads names with LOAD_NAME (env, env again, builtins); the
                # per-operation guards are found on the first lookup while they sit in env.
                for key, value in self._hot.items():
                    hot[key] = env.get(key, _ABSENT)
                    env[key] = value
            outcome, signal = run_with_deadline(lambda: self._in_own_context(body, namespace), deadline)
        finally:
            LOCAL.state = previous
            for key, module, proxy in swapped:
                if env.get(key) is proxy:
                    env[key] = module
            for key, previous_value in hot.items():
                if previous_value is _ABSENT:
                    env.pop(key, None)
                else:
                    env[key] = previous_value
            if namespace is env:
                if saved is _ABSENT:
                    env.pop("__builtins__", None)
                else:
                    env["__builtins__"] = saved
        if signal is not None:
            where = (
                user_line(signal.__traceback__, compiled.filename, program.line_map, program.blocks)
                if compiled is not None and program is not None
                else ""
            )
            if isinstance(signal, MemorySignal):
                raise REPLError(self._texts.memory(self.config.limits.memory_mb, where))
            raise REPLTimeoutError(self._texts.timeout(seconds, where))
        return outcome

    def _in_own_context(self, body: Any, namespace: dict[str, Any]) -> Any:
        """Run ``body`` in the session's own context variables (``decimal.getcontext()``...).

        So ``getcontext().prec = 50`` lasts for the session's later steps and never reaches the
        host's thread, nor another session running in it.
        """
        if self._entered:
            return body(namespace)
        self._entered = True
        try:
            return self._contextvars.run(body, namespace)
        finally:
            self._entered = False

    def _run(
        self,
        compiled: Compiled,
        program: Program,
        namespace: dict[str, Any],
        env: dict[str, Any],
        sink: CappedText,
    ) -> _Failure | None:
        """Everything that may run sandboxed code (including ``str()`` of its objects)."""
        code = compiled.code
        assert code is not None
        try:
            exec(code, namespace, env)
        except TimeoutSignal:
            raise
        except BaseException as exc:  # everything the code raised is reported
            if is_real_interrupt(exc):
                raise
            return self._failure(exc, compiled, program)
        collector = env.get("_print") if self.config.profile.stale_print_collector else None
        if isinstance(collector, PrintCollector):
            sink.extend(collector.txt)
        if compiled.trailing is not None:
            try:
                value = eval(compiled.trailing, namespace, env)
                if value is not None:
                    sink.write(str(value) + "\n")
            except TimeoutSignal:
                raise
            except BaseException as exc:  # 2fb46cc ignores any failure of the second evaluation
                if is_real_interrupt(exc):
                    raise
        return None

    def _failure(self, exc: BaseException, compiled: Compiled | None, program: Program | None) -> _Failure:
        if isinstance(exc, SandboxViolation):
            error_type: type[REPLError] = REPLSecurityError
        elif isinstance(exc, REPLError):
            error_type = type(exc)
        else:
            error_type = REPLError
        try:
            message = str(exc)
        except TimeoutSignal:
            raise
        except BaseException as inner:  # a sandboxed exception class may break str()
            if is_real_interrupt(inner):
                raise
            message = f"<unprintable {type(exc).__name__}: str() raised {type(inner).__name__}>"
        name = exc.display_name if isinstance(exc, SandboxViolation) else type(exc).__name__
        where = (
            user_line(exc.__traceback__, compiled.filename, program.line_map, program.blocks)
            if compiled is not None and program is not None
            else ""
        )
        failure = StepFailure("run", directive=_is_directive(exc))
        return _Failure(error_type, self._texts.raised(name, message, where), failure)


_ABSENT = object()
_HOT_NAMES = (
    "_getattr_",
    "_write_",
    "_rlm_type_",
    "_rlm_plain_types_",
    "_rlm_writable_types_",
    "_rlm_print_",
    "_rlm_getattr_format_",
    "_rlm_mul_",
    "_rlm_pow_",
    "__warningregistry__",
)

_RAISE_OPCODES = frozenset(dis.opmap[n] for n in ("RAISE_VARARGS", "RERAISE") if n in dis.opmap)


def is_real_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a real Ctrl-C from outside, which must reach the caller.

    Sandboxed code only ever holds a subclass of ``KeyboardInterrupt`` (the policy's builtins),
    so ``raise KeyboardInterrupt`` and ``gen.throw(KeyboardInterrupt)`` are model code; a real
    one is the builtin class itself, landing where the interpreter checks for signals, never
    on a ``raise`` instruction of sandboxed code. Everything else (SystemExit, GeneratorExit...)
    raised during a step is the model's.
    """
    if type(exc) is not KeyboardInterrupt:
        return False
    tb = exc.__traceback__
    if tb is None:
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if not code.co_filename.startswith("<rlm-repl-"):
        return True
    return not (0 <= tb.tb_lasti < len(code.co_code) and code.co_code[tb.tb_lasti] in _RAISE_OPCODES)


def _proxy_modules(env: dict[str, Any]) -> list[tuple[str, ModuleType, Any]]:
    """Swap raw modules in ``env`` (the loop puts the real ``re`` there) for their proxies.

    For the duration of the call only, so sandboxed code never holds a real module (not even as
    ``alias = re``), while the caller finds its own objects back afterwards.
    """
    swapped = []
    for key, value in env.items():
        if type(value) is ModuleType:
            swapped.append((key, value, proxy_for_module(value)))
    for key, _, proxy in swapped:
        env[key] = proxy
    return swapped
