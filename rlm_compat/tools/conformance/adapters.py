"""Implementations as the conformance runner sees them: :class:`Adapter`, over protocol sessions.

Every implementation, rlm_compat included, is reached through the protocol of docs/protocol.md:
an :class:`Adapter` holds one or more :class:`~.protocol.Session` (side by side, so a slow peer
does not dominate a run) and adds the policy of its registry entry: which kinds it runs, why it
skips the others, how results are compared, whether it is gated, which deviations apply.

rlm_compat itself runs in process through the very :class:`~.driver.Driver` that serves upstream
and the peers, with :class:`ProfileBackend` as its backend: REPL cases through
``REPLExecutor(profile=...)``, parser cases through ``rlm_compat.parser``'s upstream-exact functions
(drop-in users call ``rlm.parser`` directly, so both profiles must match upstream there), loop cases
through ``RLM(profile=...)`` with ``rlm_compat.core.litellm.acompletion`` patched by the same
scripted model. So the case-running code exists once, in the driver's ``case_runs.py``.

An outcome is ``{"result": ...}``, ``{"failure": text}`` (no result could be produced: counted as
*errored*) or ``{"skip": reason}``.
"""

from __future__ import annotations

import concurrent.futures
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import UnknownOptionWarning
from ...profiles import Profile
from . import result_diff as _compare
from .case_isolation import Emit
from .case_runs import Backend, run_executor_case, run_loop_case, run_parser_functions
from .driver import Driver
from .protocol import KINDS, LocalConnection, ProtocolError, Session

__all__ = ["Adapter", "ProfileAdapter", "ProfileBackend", "unsafe_step"]

_OUTCOME = dict[str, Any]
# Steps that reach the host (files, processes, network, interpreter internals): never run them
# against an implementation without a sandbox, whatever upstream did with them.
_HOST_ACCESS = re.compile(
    r"\b(open|exec|eval|compile|__import__|breakpoint|input)\s*\("
    r"|\bimport\b|\b(os|sys|subprocess|shutil|socket|pathlib|builtins|signal|ctypes|codecs)\b"
    r"|__\w+__|\.(enum|codecs|decoder|scanner|copyreg|sre_\w+|_\w+)\b"
)
_UNSAFE_TAGS = frozenset({"escape", "security", "abuse", "host"})


class Adapter:
    """One implementation in a run: its sessions plus its registry entry's policy.

    ``mode`` None takes the comparison mode the implementation asks for in its handshake
    (``compare``), else ``semantic``: a newcomer's messages and formatting differ by design.
    ``kinds`` limits what is sent (None: whatever the handshake lists); ``skip_reasons`` say why
    a kind is not run; ``prompt_version`` skips loop cases recorded from another checkout.
    ``profile`` is the rlm_compat profile whose deviations.toml entries apply (None: none do).
    ``oracle`` is the fixture set it is judged against (``upstream`` or ``cpython``, see
    :class:`~.implementations.Implementation`); ``runs_escapes`` sends it the escape inputs
    although it has no sandbox (the CPython reference, whose recording they are).
    """

    def __init__(
        self,
        name: str,
        sessions: Sequence[Session],
        *,
        mode: str | None = None,
        gated: bool = False,
        profile: str | None = None,
        kinds: frozenset[str] | None = None,
        skip_reasons: Mapping[str, str] | None = None,
        prompt_version: str | None = None,
        oracle: str = "upstream",
        runs_escapes: bool = False,
    ) -> None:
        if not sessions:
            raise ValueError(f"{name}: an adapter needs at least one session")
        self.name = name
        self.sessions = list(sessions)
        self.mode = mode or "semantic"
        self._asked_mode = mode
        self.gated = gated
        self.profile = profile
        self._allowed = kinds
        self.skip_reasons = dict(skip_reasons or {})
        self.prompt_version = prompt_version
        self.oracle = oracle
        self.runs_escapes = runs_escapes
        self.isolation: str | None = None
        self.kinds: frozenset[str] = frozenset()
        self.sandboxed = False
        self.info: dict[str, Any] = {}

    @property
    def hash_seed_fixed(self) -> bool:
        """Whether printed set order is comparable (the implementation runs with PYTHONHASHSEED=0)."""
        return str(self.info.get("hash_seed", "0")) == "0"

    def start(self) -> dict[str, Any]:
        """Start every session; the first handshake describes the implementation.

        If any session fails to start, those that did are stopped and the first error is raised.
        """
        with concurrent.futures.ThreadPoolExecutor(len(self.sessions)) as pool:
            futures = [pool.submit(s.start) for s in self.sessions]
            concurrent.futures.wait(futures)
        errors = [e for e in (f.exception() for f in futures) if e is not None]
        if errors:
            self.stop()
            raise errors[0]
        self.info = futures[0].result()
        offered = frozenset(self.info["kinds"])
        self.kinds = offered if self._allowed is None else offered & self._allowed
        self.sandboxed = self.info.get("sandbox") is True
        if self._asked_mode is None:
            wanted = self.info.get("compare", "semantic")
            if wanted not in _compare.MODES:
                raise ProtocolError(f"{self.name}: 'compare' must be one of {_compare.MODES}, got {wanted!r}")
            self.mode = wanted
        return self.info

    def stop(self) -> None:
        for session in self.sessions:
            session.stop()

    def run(self, kind: str, case: dict[str, Any]) -> _OUTCOME:
        return self.run_many(kind, [case])[0]

    def run_many(self, kind: str, cases: Sequence[dict[str, Any]]) -> list[_OUTCOME]:
        """Outcomes for ``cases`` in order, spread over the sessions; skips decided here.

        Starts the adapter on first use (attribution runs single cases ad hoc).
        """
        if not self.info:
            self.start()
        out: list[_OUTCOME] = [{} for _ in cases]
        todo: list[int] = []
        for index, case in enumerate(cases):
            reason = self._skip(kind, case)
            if reason is None:
                todo.append(index)
            else:
                out[index] = {"skip": reason}
        shares = [todo[n :: len(self.sessions)] for n in range(len(self.sessions))]

        def work(session: Session, share: list[int]) -> None:
            replies = session.run(kind, [cases[i] for i in share])
            for index, reply in zip(share, replies, strict=True):
                out[index] = {key: reply[key] for key in ("result", "skip", "failure") if key in reply}

        if len(self.sessions) == 1:
            work(self.sessions[0], shares[0])
        else:
            with concurrent.futures.ThreadPoolExecutor(len(self.sessions)) as pool:
                list(pool.map(work, self.sessions, shares))
        return out

    def _skip(self, kind: str, case: dict[str, Any]) -> str | None:
        if kind not in self.kinds:
            return self.skip_reasons.get(kind, f"{self.name} has no {kind} entry point")
        wanted = case.get("options", {}).get("prompt_version")
        if kind == "loop" and self.prompt_version and wanted != self.prompt_version:
            return f"recorded from the {wanted} checkout; {self.name} is {self.prompt_version}"
        if kind == "repl" and not (self.sandboxed or self.runs_escapes):
            unsafe = unsafe_step(case)
            if unsafe:
                return f"no sandbox in {self.name}; not run: {unsafe}"
        return None


def unsafe_step(case: dict[str, Any]) -> str | None:
    """Why a REPL case must not reach an implementation without a sandbox (None: it may)."""
    tags = set(case.get("tags", []))
    if tags & _UNSAFE_TAGS:
        return f"tagged {sorted(tags & _UNSAFE_TAGS)}"
    for number, step in enumerate(case.get("steps", []), 1):
        found = _HOST_ACCESS.search(step)
        if found:
            return f"step {number} uses {found.group(0).strip()!r}"
    return None


class ProfileBackend(Backend):
    """rlm_compat in one profile, as a driver backend (run in process, see the module docstring)."""

    kinds = frozenset(KINDS)
    implementation = "rlm_compat"

    def __init__(self, profile: Profile, isolation: str | None) -> None:
        self.profile = profile
        self.isolation = isolation

    def info(self) -> dict[str, Any]:
        from ... import __version__

        return {
            "implementation": self.implementation,
            "version": __version__,
            "sandbox": True,
            "compare": "exact",
            "profile": self.profile.name,
            "isolation": self.isolation or "default",
        }

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        from ...repl import REPLExecutor

        def factory(**options: Any) -> REPLExecutor:
            return REPLExecutor(**options, profile=self.profile, isolation=self.isolation)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # upstream's go to an unread stderr
            run_executor_case(factory, case, emit, isa=True)

    def parser(self, case: dict[str, Any]) -> dict[str, Any]:
        from ... import parser

        return run_parser_functions(parser, case)

    def loop(self, case: dict[str, Any], emit: Emit) -> None:
        from ... import core

        def new_rlm(kwargs: dict[str, Any], prompt_version: Any) -> core.RLM:
            return core.RLM(
                **kwargs, profile=self.profile, prompt_version=prompt_version, isolation=self.isolation
            )

        with warnings.catch_warnings():
            # the recorded cases pass what 2fb46cc's callers passed (current_depth=..., complete(
            # model=...)) on purpose; the warning is tested in tests/test_options.py
            warnings.simplefilter("ignore", UnknownOptionWarning)
            run_loop_case(core, new_rlm, case, emit, isa=True)


class ProfileAdapter(Adapter):
    """rlm_compat in this process, in one profile (``upstream``, ``fixed`` or any Profile).

    Only the two presets are looked up in deviations.toml; an ablation profile
    (``Profile.upstream().replace(...)``) runs unregistered.
    """

    def __init__(self, profile: str | Profile, isolation: str | None = None) -> None:
        resolved = profile if isinstance(profile, Profile) else Profile.named(profile)
        name = f"rlm_compat-{resolved.name}" + (f"-{isolation}" if isolation else "")
        backend = ProfileBackend(resolved, isolation)
        session = Session(LocalConnection(lambda: Driver(backend, fork=False)), name=name)
        super().__init__(
            name,
            [session],
            mode="exact",
            gated=True,
            profile=resolved.name if resolved.name in ("upstream", "fixed") else None,
        )
        self.isolation = isolation
