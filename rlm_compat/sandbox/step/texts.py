"""Every text a REPL step can answer with, in one place, for every runner.

The inline runner and the worker process build their observations and error messages here, so
the same step reads the same whichever runner ran it; the profile decides only through its
``upstream_error_text`` switch (2fb46cc's bare ``Execution error: {message}``) — data, never a
profile name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...profiles import Profile


class _Issue(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def upstream_text(self) -> str: ...


__all__ = ["NO_CODE", "NO_OUTPUT", "Texts"]

NO_CODE = "No code to execute"
NO_OUTPUT = "Code executed successfully (no output)"


def _where(where: str) -> str:
    return f" ({where})" if where else ""


class Texts:
    """The wording of one profile's observations and errors."""

    __slots__ = ("_upstream",)

    def __init__(self, profile: Profile) -> None:
        self._upstream = profile.upstream_error_text

    # --- results ----------------------------------------------------------------------------

    @staticmethod
    def output(head: str, total: int, limit: int) -> str:
        """A step's printed output: its first ``limit`` characters of ``total``, upstream's marker."""
        if total == 0:
            return NO_OUTPUT
        if total > limit:
            return f"{head[:limit]}\n\n[Output truncated: {total} chars total, showing first {limit}]"
        return head.strip()

    # --- failures ---------------------------------------------------------------------------

    def raised(self, display_name: str, message: str, where: str) -> str:
        """Model code raised: ``Execution error: NameError: ... (line 3)``."""
        if self._upstream:
            return f"Execution error: {message}"
        text = f"{display_name}: {message}" if message else display_name
        return f"Execution error: {text}{_where(where)}"

    def timeout(self, seconds: float, where: str, *, restarted: bool = False) -> str:
        """The step ran past its timeout."""
        if self._upstream:
            return f"Execution error: Execution timed out after {seconds:g}s"
        text = f"Execution error: TimeoutError: execution exceeded the {seconds:g} s timeout{_where(where)}"
        return text + (" and the REPL worker process was restarted" if restarted else "")

    @staticmethod
    def memory(limit_mb: int | None, where: str) -> str:
        """The step outgrew its memory allowance (``Limits.memory_mb``; inline runner)."""
        return (
            f"Execution error: MemoryError: execution grew the process by more than {limit_mb} MB "
            f"and was stopped{_where(where)}"
        )

    def crashed(self, how: str) -> str:
        """The worker died during the step (a C-level crash, a CPU limit, a kill from outside)."""
        if self._upstream:
            return f"Execution error: {how}"
        return f"Execution error: SystemError: {how}; the REPL worker process was restarted"

    def compile_error(self, issues: Sequence[_Issue], wheres: Sequence[str]) -> str:
        """The code did not compile, or the policy refused it before it ran (``wheres``: each
        issue's place in the user's code, as ``line 3``)."""
        if self._upstream:
            joined = ", ".join(i.upstream_text for i in issues)
            if issues[0].kind == "late-syntax":
                return f"Execution error: {joined}"
            return f"Execution error: Compilation error: {joined}"
        parts = []
        for issue, where in zip(issues, wheres, strict=True):
            text = issue.message if issue.kind != "policy" else f"SecurityError: {issue.message}"
            parts.append(text + _where(where))
        return "Execution error: " + "; ".join(parts)

    def lost_variables(self, names: Iterable[str]) -> str:
        """What a replaced worker could not keep (appended to the step's error; fixed wording only)."""
        lost = sorted(names)
        if self._upstream or not lost:
            return ""
        return (
            f"\nThese variables were lost with the old worker and are no longer defined: "
            f"{', '.join(lost)}. Variables holding plain data (str, numbers, lists, dicts...) "
            "were kept; changes made by the failed step were not."
        )

    @staticmethod
    def no_worker(why: str) -> str:
        """No worker process could be had for the session."""
        return f"Execution error: SystemError: no REPL worker process ({why})"

    @staticmethod
    def unsendable_result(function: str, value: Any) -> str:
        """A host function returned something that cannot cross into the worker."""
        return (
            f"{function}() returned a {type(value).__name__}, a non-serializable value that cannot be "
            "passed into the REPL worker process; host functions must return plain data (str, numbers, "
            "lists, dicts...)"
        )

    @staticmethod
    def unsendable_argument(function: str, exc: BaseException) -> str:
        """Model code passed a host function something that cannot leave the worker."""
        return (
            f"arguments to {function}() must be plain data (str, numbers, lists, dicts...) "
            f"to leave the REPL worker process ({type(exc).__name__}: {exc})"
        )

    @staticmethod
    def answer_too_long(length: int, limit: int, *, at_least: bool = False) -> str:
        """FINAL / FINAL_VAR produced an answer over ``Limits.answer_chars`` (``at_least``: the
        length was counted without making the text, up to past the limit)."""
        size = f"at least {length}" if at_least else str(length)
        return (
            f"the final answer is {size} characters long, over the limit of {limit} "
            "(Limits.answer_chars); answer with a shorter text"
        )

    def worker_fault(self, what: str) -> str:
        """The worker sent something the protocol does not allow (it was replaced)."""
        if self._upstream:
            return f"Execution error: the REPL worker process sent {what}"
        return f"Execution error: SystemError: the REPL worker process sent {what}; the worker was restarted"

    @staticmethod
    def cut_by_parent(limit: int) -> str:
        """Appended to a step's text the parent cut at its own limit (the worker sent more)."""
        return f"\n[cut at {limit} characters by the parent process]"

    @staticmethod
    def reply_too_large(size: int, limit: int) -> str:
        """A step's results exceed what the parent reads back (``Limits.reply_bytes``)."""
        return (
            f"Execution error: MemoryError: the step's results ({size} bytes of variables and "
            f"output) exceed the {limit} byte limit for what leaves the REPL worker; "
            "the worker was restarted"
        )
