"""Which failed model calls an RLM retries, and after how long.

The RLM retries transient provider failures itself, under every API preset, one attempt at a
time, so that every provider request is a counted call, reserved in the run's budget before it is
sent, and visible in the trajectory (the provider SDK's own retries are switched off). The presets
differ only in the defaults (:attr:`~rlm_compat.compat.ApiSemantics.max_retries_default`,
:attr:`~rlm_compat.compat.ApiSemantics.retry_backoff_default`). This module is the policy only —
what is transient and how long to wait; the loop does the counting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any

from .errors import ConfigurationError, ProviderResponseError

__all__ = ["RetryPolicy", "is_retryable"]

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_TRANSIENT_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "InternalServerError",
        "ProviderConnectionError",
        "ProviderTimeoutError",
        "RateLimitError",
        "ServiceUnavailableError",
        "Timeout",
    }
)


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    if status is None:
        status = getattr(getattr(error, "response", None), "status_code", None)
    try:
        return int(status) if isinstance(status, (int, str)) and not isinstance(status, bool) else None
    except ValueError:
        return None


def is_retryable(error: BaseException) -> bool:
    """Transient: timeouts, dropped connections, 408/409/425/429 and 5xx, a malformed reply.

    Never a cancellation (the caller asked to stop), a spent budget or a request the provider
    refused as such (4xx): repeating those cannot succeed.
    """
    if isinstance(error, asyncio.CancelledError):
        return False
    status = _status(error)
    if status is not None:
        return status in _RETRYABLE_STATUS or status >= 500
    if isinstance(error, (TimeoutError, asyncio.TimeoutError, ConnectionError, ProviderResponseError)):
        return True
    return type(error).__name__ in _TRANSIENT_NAMES


def retry_after(error: BaseException) -> float | None:
    """The provider's ``Retry-After`` in seconds (``retry-after-ms`` or the numeric form), if sent.

    The lean client (:mod:`rlm_compat.openai_client`) hands it on as ``retry_after``. Otherwise
    the headers are looked for where litellm and the openai SDK put them across their releases:
    litellm's ``litellm_response_headers`` (litellm 1.9x hands on a rebuilt ``response`` without
    them), then the exception's ``response.headers`` (the SDK's, and litellm's later releases).
    """
    own = getattr(error, "retry_after", None)  # the lean client's, already in seconds
    if isinstance(own, (int, float)) and not isinstance(own, bool) and math.isfinite(own) and own >= 0:
        return float(own)
    sources = (
        getattr(error, "litellm_response_headers", None),
        getattr(getattr(error, "response", None), "headers", None),
    )
    for headers in sources:
        seconds = _header_seconds(headers, "retry-after-ms", 1000.0)
        if seconds is None:
            seconds = _header_seconds(headers, "retry-after", 1.0)
        if seconds is not None:
            return seconds
    return None


def _header_seconds(headers: Any, name: str, per_second: float) -> float | None:
    try:
        value = headers.get(name) or headers.get(name.title())
        seconds = float(value) / per_second
    except (AttributeError, TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` more attempts after a transient failure; exponential backoff from
    ``backoff_seconds``, or the provider's ``Retry-After`` when it asks for longer."""

    max_retries: int = 0
    backoff_seconds: float = 1.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or self.max_retries < 0
        ):
            raise ConfigurationError(f"max_retries must be an integer >= 0, not {self.max_retries!r}")
        backoff = self.backoff_seconds
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not backoff >= 0:
            raise ConfigurationError(f"retry_backoff_seconds must be a number >= 0, not {backoff!r}")
        if not math.isfinite(backoff):
            raise ConfigurationError("retry_backoff_seconds must be finite")

    def delay(self, failed_attempt: int, error: BaseException) -> float | None:
        """Seconds to wait before attempt ``failed_attempt + 1``; None when not to retry."""
        if failed_attempt > self.max_retries or not is_retryable(error):
            return None
        backoff = self.backoff_seconds * 2 ** (failed_attempt - 1)
        asked = retry_after(error)
        return float(backoff if asked is None else max(backoff, asked))
