"""The OpenAI-shaped error every refusal and failure becomes (no aiohttp: plain data)."""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError", "bad"]


class ApiError(Exception):
    """An OpenAI-shaped error answer: HTTP status, ``error.type``, ``error.code`` and message.

    ``retry``: the ``x-should-retry`` header the official client obeys (False for outcomes a retry
    would only repeat at the same cost, such as a spent budget); ``retry_after`` seconds for 429.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        retry: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.retry, self.retry_after = retry, retry_after

    def body(self) -> dict[str, Any]:
        """``{"error": {...}}`` as OpenAI sends it."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        """``x-should-retry`` / ``Retry-After`` where they apply."""
        out: dict[str, str] = {}
        if self.retry is not None:
            out["x-should-retry"] = "true" if self.retry else "false"
        if self.retry_after is not None:
            out["Retry-After"] = f"{self.retry_after:g}"
        return out


def bad(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    """A 400 for a request the client must change."""
    return ApiError(400, message, param=param, code=code, retry=False)
