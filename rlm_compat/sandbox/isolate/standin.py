"""What stands in the parent's ``env`` for a value that lives only in the REPL worker."""

from __future__ import annotations

from typing import Any

__all__ = ["WorkerObject"]


class WorkerObject:
    """Stands in ``env`` for a value that lives only in the worker (a function, a class...).

    Callable, so containers that insist on a callable (``defaultdict(lambda: 0)``) can hold one;
    calling it says where the real one is.
    """

    __slots__ = ("name", "type_name", "worker_repr")

    def __init__(self, name: str, type_name: str, worker_repr: str = "") -> None:
        self.name = name
        self.type_name = type_name
        self.worker_repr = worker_repr

    def __repr__(self) -> str:
        return f"<{self.type_name} {self.name!r} (lives in the REPL worker process)>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self!r} can only be called by code running in the REPL")

    def __rlm_stand_in__(self) -> tuple[str, str]:
        """``(type qualname, repr in the worker)`` for encoders that describe values by type."""
        return self.type_name, self.worker_repr
