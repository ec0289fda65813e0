"""Drop-in for ``rlm.repl``: run model-written code in a restricted, persistent namespace.

``REPLExecutor(timeout, max_output_chars).execute(code, env)`` keeps upstream's signature,
return strings and ``REPLError``. It is a thin facade: it builds one
:class:`~rlm_compat.config.ReplConfig` and hands every step to the runner that config asks for
(:mod:`rlm_compat.sandbox.runner`): a killable, hardened worker process per executor by default
in both profiles, the calling thread with ``isolation="inline"`` (or switch ``inline_by_default``).
"""

from __future__ import annotations

import math
import threading
from typing import Any

from ._releases import select_release
from .compat import ApiSemantics, resolve_api
from .errors import ConfigurationError, REPLError, REPLTimeoutError
from .profiles import Profile
from .sandbox import (
    HostCall,
    Limits,
    ReplConfig,
    Runner,
    WorkerResourceLimits,
    host_call,
    make_runner,
    namespace_listing,
)

__all__ = ["REPLError", "REPLExecutor", "REPLTimeoutError", "WorkerResourceLimits"]


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
    ``state``: where a worker keeps the session's variables — ``"env"`` (upstream's contract:
    after each step ``env`` holds every variable, a changed one copied back) or ``"worker"`` (the
    RLM loop's: ``env`` gets small plain values, and a stand-in naming the type of anything
    bigger, which stays in the worker; :meth:`get_variable` fetches one on demand). Inline, the
    variables are in ``env`` either way.
    ``api``: the API preset (:mod:`rlm_compat.compat`; default ``$RLM_COMPAT_API`` or 2fb46cc's);
    under ``"0.5"`` the REPL has ``SHOW_VARS()``, an ``answer`` dict in ``env`` ends a run
    when marked ready (:meth:`pop_final_answer`), and the session keeps its variables whatever
    ``env`` dict each ``execute`` gets (``session_outlives_env``).

    Lifecycle (recursive-llm 0.5.0's): use it as a context manager, or call :meth:`close`, to
    release the worker at once (a later step starts a new one); :meth:`abort` kills a running
    step from another thread and retires the executor; :meth:`get_variable` reads the session.
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
        api: str | ApiSemantics | None = None,
        state: str = "env",
    ) -> None:
        if state not in ("env", "worker"):
            raise ConfigurationError(f"state must be 'env' or 'worker', not {state!r}")
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
        self.api = resolve_api(api)
        self._release = select_release(self.api)
        if self.api.strip_output_before_limit and not config.strip_output:
            config = config.replace(strip_output=True)
        self.config = config
        self.state = state
        shared = self._release.repl_shared_names
        self._runner: Runner = make_runner(config, state=state, shared=shared)
        self._env: dict[str, Any] | None = None
        self._host_names: frozenset[str] = frozenset()
        self._final_answer: str | None = None
        self._aborted = threading.Event()

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

    def execute(self, code: str, env: dict[str, Any], *, timeout: float | None = None) -> str:
        """Run ``code`` (a model response; fences are handled) with ``env`` as its namespace.

        Returns the printed output plus the shown last expression, or one of upstream's fixed
        strings. ``timeout``: this step's limit, capped by the executor's (0.5.0's keyword; a
        worker that outlives a shorter one is killed, its worker-only values lost). Raises
        :class:`REPLError` (``REPLTimeoutError`` / ``REPLSecurityError`` for timeouts and policy
        refusals) and nothing else for any code.
        """
        if not isinstance(code, str):
            raise REPLError(f"Execution error: code must be a str, not {type(code).__name__}")
        if not isinstance(env, dict):
            raise REPLError(f"Execution error: env must be a dict, not {type(env).__name__}")
        step_timeout = _check_timeout(timeout)
        if self._aborted.is_set():
            raise REPLError("REPL execution was aborted; create a new REPLExecutor")
        given = env
        if self.api.session_outlives_env and self._env is not None and env is not self._env:
            self._host_names |= frozenset(k for k, v in env.items() if is_host_function(v))
            env = self._env
            env.update(given)
        elif self._env is not env:
            self._host_names = frozenset(k for k, v in env.items() if is_host_function(v))
        self._env = env
        added = self._add_helpers(env)
        try:
            return self._guard(lambda: self._runner.execute(code, env, timeout=step_timeout))
        finally:
            for name in added:
                env.pop(name, None)
            if given is not env:
                given.update(env)
            answer = env.get("answer")
            if self._release.answer_ready(answer):
                self._final_answer = str(answer.get("content", ""))

    def preload(self, env: dict[str, Any]) -> None:
        """Start the worker and send it ``env`` in the background, before the first step (the
        RLM loop calls this before its first model call, so a big context crosses meanwhile).
        Nothing inline; a failure is reported by the first step."""
        preload = getattr(self._runner, "preload", None)
        if preload is not None and not self._aborted.is_set():
            preload(env)

    def render(self, env: dict[str, Any], name: str) -> str:
        """``str(env[name])`` as a final answer, under the same time and memory limits as a step."""
        return self._guard(lambda: self._runner.render(env, name))

    def get_variable(self, name: str, *, timeout: float | None = None) -> tuple[bool, Any]:
        """``(True, value)`` for a session variable whose value the host holds, else ``(False, None)``.

        Values that live only in a worker process (functions, class instances there) read as not
        found, as 0.5.0's unpicklable ones do. ``timeout`` is accepted for 0.5.0's signature; the
        read never runs model code. REPLError before the first step or after :meth:`close`.
        """
        _check_timeout(timeout)
        env = self._env
        if env is None:
            raise REPLError("REPL worker is not running: execute a step before get_variable()")
        if name not in env:
            return False, None
        if lives_in_worker(env[name]):
            fetch = getattr(self._runner, "fetch", None)
            if self.state == "worker" and fetch is not None:
                return fetch(name)  # type: ignore[no-any-return]
            return False, None
        return True, env[name]

    def pop_final_answer(self) -> str | None:
        """The answer a step published through the ``answer`` dict (0.5 semantics), once."""
        answer, self._final_answer = self._final_answer, None
        return answer

    def reset_final_answer(self, *, timeout: float | None = None) -> None:
        """Withdraw a published answer (a validator rejected it): ``answer["ready"]`` is False again.

        The dict is replaced by an unready copy, so the change reaches a worker with the next step.
        """
        _check_timeout(timeout)
        env = self._env
        if env is None:
            raise REPLError("REPL worker is not running: execute a step before reset_final_answer()")
        answer = env.get("answer")
        if isinstance(answer, dict):
            env["answer"] = {**answer, "ready": False}
        self._final_answer = None

    def close(self) -> None:
        """Release the worker process, if any (a later step starts a new one from ``env``)."""
        self._runner.close()
        self._env = None

    def abort(self) -> None:
        """Stop a step in progress from any thread, without waiting for it; retire the executor.

        A worker process is killed at once (the running ``execute`` raises REPLError); inline
        code cannot be interrupted from another thread and ends at its own timeout. Every later
        ``execute`` raises REPLError; :meth:`close` still releases what is left.
        """
        self._aborted.set()
        self._runner.abort()

    def __enter__(self) -> REPLExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _add_helpers(self, env: dict[str, Any]) -> list[str]:
        """Put the preset's REPL helpers in ``env`` for one step; the names added (removed after)."""
        if not self.api.show_vars or "SHOW_VARS" in env:
            return []
        hidden = self._host_names

        def SHOW_VARS(listing: dict[str, str] | None = None) -> dict[str, str]:
            """The session's variables and their type names (host functions, modules, _names left
            out), as they are when it is called: ``listing`` is made in the running step's
            namespace (a ``"namespace"`` host function); ``env`` serves a call from outside a step."""
            if listing is None:
                listing = {name: _type_name(env[name]) for name in namespace_listing(env)}
            return {
                name: kind for name, kind in listing.items() if name != "SHOW_VARS" and name not in hidden
            }

        env["SHOW_VARS"] = host_call(SHOW_VARS, "namespace")
        return ["SHOW_VARS"]

    @staticmethod
    def _guard(call: Any) -> str:
        try:
            return str(call())
        except REPLError:
            raise
        except Exception as exc:  # a bug of ours must still reach the caller as a REPLError
            raise REPLError(f"Execution error: internal REPL failure ({type(exc).__name__}: {exc})") from exc


def _check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout) if math.isfinite(timeout) else None


def is_host_function(value: Any) -> bool:
    """A function the host put in ``env`` (not a class, not a stand-in for a worker's function)."""
    if isinstance(value, HostCall):
        return True
    return callable(value) and not isinstance(value, type) and not lives_in_worker(value)


def lives_in_worker(value: Any) -> bool:
    return hasattr(type(value), "__rlm_stand_in__")


def _type_name(value: Any) -> str:
    """The type's name; for a worker's value, the name of its type in the worker."""
    if lives_in_worker(value):
        return str(value.__rlm_stand_in__()[0]).rsplit(".", 1)[-1]
    return type(value).__name__
