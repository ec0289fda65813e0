"""Drop-in for ``rlm.repl``: run model-written code in a restricted, persistent namespace.

``REPLExecutor(timeout, max_output_chars).execute(code, env)`` keeps upstream's signature,
return strings and ``REPLError``. It is a thin facade: it builds one
:class:`~rlm_compat.config.ReplConfig` and hands every step to the runner that config asks for
(:mod:`rlm_compat.sandbox.runner`): a killable worker process per executor by default in
profile ``fixed``, the calling thread in profile ``upstream`` or with ``isolation="inline"``.
"""

from __future__ import annotations

from typing import Any

from .config import Limits, ReplConfig
from .errors import ConfigurationError, REPLError
from .profiles import Profile
from .sandbox.runner import Runner, make_runner

__all__ = ["REPLError", "REPLExecutor"]


class REPLExecutor:
    """Executes model-written Python in a restricted namespace (``env``) that persists across calls.

    ``timeout``: seconds of sandboxed computation per call (time spent inside host functions such
    as ``recursive_llm`` does not count); ``None`` disables it. ``max_output_chars``: longer output
    is cut with upstream's marker. ``profile``: ``"fixed"`` (default, or ``$RLM_COMPAT_PROFILE``),
    ``"upstream"`` or a :class:`Profile`. ``isolation``: ``"process"`` (a worker process per
    executor, killed and replaced when a step outlives its timeout) or ``"inline"`` (the calling
    thread); ``None`` means ``$RLM_COMPAT_ISOLATION`` or the profile's default. ``limits``: a
    :class:`~rlm_compat.config.Limits`; ``memory_limit_mb`` is a shortcut for its ``memory_mb``.
    ``config``: a whole :class:`~rlm_compat.config.ReplConfig` instead of the separate arguments.
    Use it as a context manager, or call :meth:`close`, to release the worker at once.
    """

    def __init__(
        self,
        timeout: float | None = 5,
        max_output_chars: int = 2000,
        *,
        profile: str | Profile | None = None,
        isolation: str | None = None,
        limits: Limits | None = None,
        memory_limit_mb: int | object | None = ...,
        config: ReplConfig | None = None,
    ) -> None:
        if config is None:
            if limits is None:
                limits = Limits()
            if memory_limit_mb is not ...:
                limits = limits.replace(memory_mb=memory_limit_mb)
            config = ReplConfig(
                profile=profile,  # type: ignore[arg-type]  # resolved by ReplConfig
                timeout=timeout,  # type: ignore[arg-type]  # None -> inf, validated
                max_output_chars=max_output_chars,
                isolation=isolation,
                limits=limits,
            )
        elif not isinstance(config, ReplConfig):
            raise ConfigurationError(f"config must be a ReplConfig, not {type(config).__name__}")
        self.config = config
        self._runner: Runner = make_runner(config)

    @property
    def timeout(self) -> float:
        """Seconds per step (``math.inf``: none)."""
        return self.config.timeout

    @property
    def max_output_chars(self) -> int:
        """Output beyond this is cut with upstream's marker."""
        return self.config.max_output_chars

    @property
    def profile(self) -> Profile:
        """The behaviour profile."""
        return self.config.profile

    @property
    def isolation(self) -> str:
        """``"inline"`` or ``"process"``."""
        return str(self.config.isolation)

    @property
    def memory_limit_mb(self) -> int | None:
        """``limits.memory_mb``."""
        return self.config.limits.memory_mb

    def __repr__(self) -> str:
        return (
            f"REPLExecutor(timeout={self.timeout:g}, max_output_chars={self.max_output_chars!r}, "
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
        if not isinstance(code, str):
            raise REPLError(f"Execution error: code must be a str, not {type(code).__name__}")
        if not isinstance(env, dict):
            raise REPLError(f"Execution error: env must be a dict, not {type(env).__name__}")
        return self._guard(lambda: self._runner.execute(code, env))

    def render(self, env: dict[str, Any], name: str) -> str:
        """``str(env[name])`` as a final answer, under the same time and memory limits as a step."""
        return self._guard(lambda: self._runner.render(env, name))

    def close(self) -> None:
        """Release the worker process, if any (the executor stays usable; a new one starts)."""
        self._runner.close()

    def __enter__(self) -> REPLExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def _guard(call: Any) -> str:
        try:
            return str(call())
        except REPLError:
            raise
        except Exception as exc:  # a bug of ours must still reach the caller as a REPLError
            raise REPLError(f"Execution error: internal REPL failure ({type(exc).__name__}: {exc})") from exc
