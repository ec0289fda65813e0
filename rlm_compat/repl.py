"""Drop-in for ``rlm.repl``: the restricted REPL executor (first working version)."""

from __future__ import annotations

import io
from typing import Any

from RestrictedPython import compile_restricted_exec, limited_builtins, safe_globals
from RestrictedPython.Guards import (
    full_write_guard,
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safer_getattr,
)

from .errors import REPLError
from .profiles import Profile, resolve_profile

__all__ = ["REPLError", "REPLExecutor"]


class _Printer:
    def __init__(self, sink: io.StringIO) -> None:
        self._sink = sink

    def __call__(self, _getattr: Any = None) -> _Printer:
        return self

    def _call_print(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("file", None)
        print(*args, file=self._sink, **kwargs)


class REPLExecutor:
    """Executes model-written code in a restricted namespace."""

    def __init__(
        self,
        timeout: float = 5,
        max_output_chars: int = 2000,
        *,
        profile: str | Profile | None = None,
        isolation: str = "inline",
    ) -> None:
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        self.profile = resolve_profile(profile)
        self.isolation = isolation

    def __repr__(self) -> str:
        return (
            f"REPLExecutor(timeout={self.timeout!r}, max_output_chars={self.max_output_chars!r}, "
            f"profile={self.profile.name!r}, isolation={self.isolation!r})"
        )

    def execute(self, code: str, env: dict[str, Any]) -> str:
        """Run ``code`` with ``env`` as its namespace; return the text shown to the model."""
        if not code.strip():
            return "No code to execute"
        sink = io.StringIO()
        g: dict[str, Any] = dict(safe_globals)
        g.update(limited_builtins)
        builtins = dict(safe_globals["__builtins__"])
        builtins.update(
            _getattr_=safer_getattr,
            _getitem_=lambda o, i: o[i],
            _getiter_=iter,
            _write_=full_write_guard,
            _unpack_sequence_=guarded_unpack_sequence,
            _iter_unpack_sequence_=guarded_iter_unpack_sequence,
            _print_=_Printer(sink),
        )
        try:
            result = compile_restricted_exec(code)
            if result.errors:
                raise REPLError(f"Execution error: Compilation error: {', '.join(result.errors)}")
            env["__builtins__"] = builtins
            try:
                exec(result.code, env)
            finally:
                env.pop("__builtins__", None)
        except REPLError:
            raise
        except Exception as exc:
            raise REPLError(f"Execution error: {exc}") from None
        out = sink.getvalue()
        if not out:
            return "Code executed successfully (no output)"
        if len(out) > self.max_output_chars:
            n = self.max_output_chars
            return f"{out[:n]}\n\n[Output truncated: {len(out)} chars total, showing first {n}]"
        return out.strip()
