"""Drop-in for ``rlm.repl``: run model-written code in a restricted, persistent namespace.

``REPLExecutor(timeout, max_output_chars).execute(code, env)`` keeps upstream's signature,
return strings and ``REPLError``; what the code may do, how output is collected and which of
2fb46cc's quirks apply is decided by the :class:`~rlm_compat.profiles.Profile` (see docs/repl.md).
The machinery lives in :mod:`rlm_compat.sandbox`; this module only orchestrates one call.
"""

from __future__ import annotations

import dis
import math
from types import ModuleType
from typing import Any

from .errors import ConfigurationError, REPLError, REPLSecurityError, REPLTimeoutError
from .profiles import Profile, resolve_profile
from .sandbox.context import LOCAL, ExecState, Session
from .sandbox.deadline import Deadline, run_with_deadline
from .sandbox.modules import proxy_for_module
from .sandbox.output import CappedText, PrintCollector
from .sandbox.policy import session_builtins
from .sandbox.prep import Compiled, CompileOptions, Program, compile_program, extract, user_line
from .sandbox.process import ProcessRunner
from .sandbox.violations import MemorySignal, SandboxViolation, TimeoutSignal

__all__ = ["REPLError", "REPLExecutor"]

_ISOLATIONS = ("inline", "process")


class _Failure:
    """What went wrong inside the guarded region, already rendered (rendering may run user code)."""

    __slots__ = ("error_type", "text")

    def __init__(self, error_type: type[REPLError], text: str) -> None:
        self.error_type = error_type
        self.text = text


class REPLExecutor:
    """Executes model-written Python in a restricted namespace (``env``) that persists across calls.

    ``timeout``: seconds of sandboxed computation per call (time spent inside host functions such
    as ``recursive_llm`` does not count); ``None`` (stored as ``math.inf``) disables it.
    ``max_output_chars``: longer output is cut with upstream's marker. ``profile``: ``"fixed"`` (default, or
    ``$RLM_COMPAT_PROFILE``), ``"upstream"`` or a :class:`Profile`. ``isolation``: ``"inline"``
    runs in the calling thread; ``"process"`` in a persistent worker process per executor, killed
    and replaced at the timeout (see :mod:`rlm_compat.sandbox.process`).
    ``memory_limit_mb``: an execution during which the process grows
    by more than this is stopped (Linux; ``None`` disables).
    """

    def __init__(
        self,
        timeout: float | None = 5,
        max_output_chars: int = 2000,
        *,
        profile: str | Profile | None = None,
        isolation: str = "inline",
        memory_limit_mb: int | None = 1024,
    ) -> None:
        if timeout is None:
            timeout = math.inf
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or math.isnan(timeout)
            or timeout <= 0
        ):
            raise ConfigurationError(
                f"timeout must be a positive number of seconds (or None for none), not {timeout!r}"
            )
        if (
            isinstance(max_output_chars, bool)
            or not isinstance(max_output_chars, int)
            or max_output_chars < 0
        ):
            raise ConfigurationError(
                f"max_output_chars must be a non-negative integer, not {max_output_chars!r}"
            )
        if isolation not in _ISOLATIONS:
            raise ConfigurationError(
                f"isolation must be one of {list(_ISOLATIONS)}, not {isolation!r}"
            )
        if memory_limit_mb is not None and (
            isinstance(memory_limit_mb, bool)
            or not isinstance(memory_limit_mb, int)
            or memory_limit_mb <= 0
        ):
            raise ConfigurationError(
                f"memory_limit_mb must be a positive integer or None, not {memory_limit_mb!r}"
            )
        self.timeout: float = timeout
        self.memory_limit_mb = memory_limit_mb
        self._memory_limit = None if memory_limit_mb is None else memory_limit_mb << 20
        self.max_output_chars = max_output_chars
        self.profile = resolve_profile(profile)
        self.isolation = isolation
        self._options = CompileOptions.from_profile(self.profile)
        self._session = Session()
        self._builtins = session_builtins(self.profile, self._session)
        self._hot = {k: self._builtins[k] for k in _HOT_NAMES if k in self._builtins}
        self._process: ProcessRunner | None = None
        if isolation == "process":
            self._process = ProcessRunner(
                self.profile, max_output_chars, memory_limit_mb, self.timeout
            )

    def __repr__(self) -> str:
        return (
            f"REPLExecutor(timeout={self.timeout!r}, max_output_chars={self.max_output_chars!r}, "
            f"profile={self.profile.name!r}, isolation={self.isolation!r}, "
            f"memory_limit_mb={self.memory_limit_mb!r})"
        )

    # --- public -------------------------------------------------------------------------------

    def execute(self, code: str, env: dict[str, Any]) -> str:
        """Run ``code`` (a model response; fences are handled) with ``env`` as its namespace.

        Returns the printed output plus the shown last expression, or one of upstream's fixed
        strings. Raises :class:`REPLError` (``REPLTimeoutError`` / ``REPLSecurityError`` for
        timeouts and policy refusals) and nothing else for any code.
        """
        try:
            return self._execute(code, env)
        except REPLError:
            raise
        except Exception as exc:  # a bug of ours must still reach the caller as a REPLError
            raise REPLError(
                f"Execution error: internal REPL failure ({type(exc).__name__}: {exc})"
            ) from exc

    # --- one call -----------------------------------------------------------------------------

    def _execute(self, code: str, env: dict[str, Any]) -> str:
        if not isinstance(code, str):
            raise REPLError(f"Execution error: code must be a str, not {type(code).__name__}")
        if not isinstance(env, dict):
            raise REPLError(f"Execution error: env must be a dict, not {type(env).__name__}")
        if self._process is not None:
            if not code.strip():
                return "No code to execute"
            return self._process.execute(code, env)
        program = extract(code, self._options.first_fence_only)
        if not program.source.strip():
            return "No code to execute"
        compiled = compile_program(program.source, self._options)
        if compiled.code is None:
            raise self._compile_error(compiled, program)

        sink = CappedText(self.max_output_chars)
        deadline = (
            Deadline(self.timeout, self._memory_limit)
            if math.isfinite(self.timeout) or self._memory_limit is not None
            else None
        )
        state = ExecState(sink, self.max_output_chars, env, self._session, deadline)
        if self.profile.separate_scopes:
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
            outcome, signal = run_with_deadline(
                lambda: self._run(compiled, program, namespace, env, sink), deadline
            )
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
            error_type = REPLError if isinstance(signal, MemorySignal) else REPLTimeoutError
            raise error_type(self._timeout_text(signal, compiled, program))
        if isinstance(outcome, _Failure):
            raise outcome.error_type(outcome.text)
        assert outcome is not None
        return self._render(outcome)

    def _run(
        self,
        compiled: Compiled,
        program: Program,
        namespace: dict[str, Any],
        env: dict[str, Any],
        sink: CappedText,
    ) -> CappedText | _Failure:
        """Everything that may run sandboxed code (including ``str()`` of its objects)."""
        code = compiled.code
        assert code is not None
        try:
            exec(code, namespace, env)
        except TimeoutSignal:
            raise
        except (KeyboardInterrupt, SystemExit) as exc:
            if not _raised_by_sandbox(exc):
                raise  # a real interrupt from outside
            return self._failure(exc, compiled, program)
        except BaseException as exc:  # everything the code raised is reported
            return self._failure(exc, compiled, program)
        collector = env.get("_print") if self.profile.stale_print_collector else None
        if isinstance(collector, PrintCollector):
            sink.extend(collector.txt)
        if compiled.trailing is not None:
            try:
                value = eval(compiled.trailing, namespace, env)
                if value is not None:
                    sink.write(str(value) + "\n")
            except TimeoutSignal:
                raise
            except Exception:  # 2fb46cc ignores any failure of the second evaluation
                pass
        return sink

    # --- texts --------------------------------------------------------------------------------

    def _render(self, out: CappedText) -> str:
        if out.total == 0:
            return "Code executed successfully (no output)"
        text = out.getvalue()
        n = self.max_output_chars
        if out.total > n:
            return f"{text[:n]}\n\n[Output truncated: {out.total} chars total, showing first {n}]"
        return text.strip()

    def _failure(self, exc: BaseException, compiled: Compiled, program: Program) -> _Failure:
        if isinstance(exc, SandboxViolation):
            error_type: type[REPLError] = REPLSecurityError
        elif isinstance(exc, REPLError):
            error_type = type(exc)
        else:
            error_type = REPLError
        try:
            message = str(exc)
        except Exception:  # a sandboxed exception class may break str()
            message = f"<unprintable {type(exc).__name__}>"
        if self.profile.upstream_error_text:
            return _Failure(error_type, f"Execution error: {message}")
        name = exc.display_name if isinstance(exc, SandboxViolation) else type(exc).__name__
        text = f"{name}: {message}" if message else name
        where = user_line(exc.__traceback__, compiled.filename, program.line_map, program.blocks)
        return _Failure(error_type, f"Execution error: {text}" + (f" ({where})" if where else ""))

    def _timeout_text(self, signal: TimeoutSignal, compiled: Compiled, program: Program) -> str:
        where = user_line(signal.__traceback__, compiled.filename, program.line_map, program.blocks)
        if isinstance(signal, MemorySignal):
            return (
                f"Execution error: MemoryError: execution grew the process by more than "
                f"{self.memory_limit_mb} MB and was stopped" + (f" ({where})" if where else "")
            )
        if self.profile.upstream_error_text:
            return f"Execution error: Execution timed out after {self.timeout:g}s"
        return (
            f"Execution error: TimeoutError: execution exceeded the {self.timeout:g} s timeout"
            + (f" ({where})" if where else "")
        )

    def _compile_error(self, compiled: Compiled, program: Program) -> REPLError:
        issues = compiled.issues
        policy = any(i.kind == "policy" for i in issues)
        error_type = REPLSecurityError if policy else REPLError
        if self.profile.upstream_error_text:
            joined = ", ".join(i.upstream_text for i in issues)
            if issues[0].kind == "late-syntax":
                return error_type(f"Execution error: {joined}")
            return error_type(f"Execution error: Compilation error: {joined}")
        from .sandbox.prep import describe_line

        parts = []
        for issue in issues:
            text = issue.message if issue.kind != "policy" else f"SecurityError: {issue.message}"
            where = describe_line(issue.line, program.line_map, program.blocks)
            parts.append(text + (f" ({where})" if where else ""))
        return error_type("Execution error: " + "; ".join(parts))


_ABSENT = object()
_HOT_NAMES = (
    "_getattr_", "_write_", "_rlm_type_", "_rlm_plain_types_", "_rlm_writable_types_",
    "_rlm_print_", "_rlm_getattr_format_", "_rlm_mul_", "_rlm_pow_", "__warningregistry__",
)


_RAISE_OPCODES = frozenset(dis.opmap[n] for n in ("RAISE_VARARGS", "RERAISE") if n in dis.opmap)


def _raised_by_sandbox(exc: BaseException) -> bool:
    """Whether sandboxed code raised ``exc`` with a ``raise`` statement (not a real signal).

    A signal-raised KeyboardInterrupt lands where the interpreter checks for signals (loop
    back-edges, calls), never on a ``raise`` instruction.
    """
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if not code.co_filename.startswith("<rlm-repl-"):
        return False
    return 0 <= tb.tb_lasti < len(code.co_code) and code.co_code[tb.tb_lasti] in _RAISE_OPCODES


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
