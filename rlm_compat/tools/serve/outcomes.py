"""Which answer a run that ended without a final answer gets: status, ``type``, ``code``, ``param``.

One table for both client paths (litellm and the lean OpenAI-compatible client): a provider failure is
classified by what happened (its HTTP status, a timeout, an unusable reply), never by which client
saw it, so the same provider failure is the same error whichever path a model uses. Retries are the
RLM's own (``--max-retries``, :mod:`rlm_compat.retry`), the same policy on both paths; by the time a
failure gets here they are spent. docs/serve.md has the table.
"""

from __future__ import annotations

import re

from ...errors import (
    BudgetExceededError,
    ConfigurationError,
    LLMCallError,
    MaxDepthError,
    MaxIterationsError,
)
from ..shared.tooling_errors import ToolUsageError
from .api_errors import ApiError

__all__ = ["BUDGET_FIELDS", "error_for_failure"]

BUDGET_FIELDS = {
    "llm_calls": ("max_calls", "model calls"),
    "total_tokens": ("max_tokens", "tokens"),
    "estimated_cost_usd": ("max_cost_usd", "USD"),
    "elapsed_seconds": ("max_seconds", "seconds"),
}
"""The library's budget metric -> the request's own ``rlm`` field and its unit."""

_BUDGET = re.compile(r"exceeded for (\w+): limit=([^,]+), observed=([^;]+)")
_HTTP_STATUS = re.compile(r"answered HTTP (\d{3})")

_BY_NAME = {
    "RateLimitError": 429,
    "ProviderRateLimitError": 429,
    "AuthenticationError": 401,
    "PermissionDeniedError": 403,
    "Timeout": 504,
    "APITimeoutError": 504,
    "ProviderTimeoutError": 504,
}
"""litellm's and the lean client's exception names -> the provider status they stand for."""

_PROVIDER_NAMES = frozenset(
    {
        "APIError",
        "APIConnectionError",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadRequestError",
        "NotFoundError",
        "BadGatewayError",
        "UnprocessableEntityError",
        "JSONSchemaValidationError",
        "ContextWindowExceededError",
        "ContentPolicyViolationError",
        "ProviderConnectionError",
        "ProviderResponseError",
        "ProviderStatusError",
        "LLMCallError",
    }
)
"""Provider failures without a status of their own meaning here: 502 ``provider_error``."""


def error_for_failure(exc: BaseException | None, error_type: str, message: str) -> ApiError:
    """The answer for a run that ended without a final answer (``exc`` if it was raised here)."""
    if isinstance(exc, BudgetExceededError) or error_type == "BudgetExceededError":
        return _budget_error(exc, message)
    if isinstance(exc, MaxIterationsError) or error_type == "MaxIterationsError":
        return ApiError(422, message, type="rlm_error", code="max_iterations", retry=False)
    if isinstance(exc, MaxDepthError) or error_type == "MaxDepthError":
        return ApiError(422, message, type="rlm_error", code="max_depth", retry=False)
    if isinstance(exc, (ConfigurationError, ToolUsageError)) or error_type in (
        "ConfigurationError",
        "UnsupportedOptionError",
        "ToolUsageError",
    ):
        return ApiError(400, message, code="bad_configuration", retry=False)
    status = _provider_status(error_type, message)
    if status is not None or isinstance(exc, LLMCallError) or error_type in _PROVIDER_NAMES:
        return provider_error(status, message)
    return ApiError(
        500, f"the run failed: {error_type}: {message}", type="server_error", code="run_failed", retry=False
    )


def provider_error(status: int | None, message: str) -> ApiError:
    """The provider's failure as ours: 429 stays 429, a timeout 504, everything else 502."""
    text = f"model provider: {message}"
    if status == 429:
        return ApiError(429, text, type="provider_error", code="provider_rate_limited", retry=False)
    if status in (408, 504):
        return ApiError(504, text, type="provider_error", code="provider_timeout", retry=False)
    if status in (401, 403):
        return ApiError(502, text, type="provider_error", code="provider_authentication", retry=False)
    return ApiError(502, text, type="provider_error", code="provider_error", retry=False)


def _provider_status(error_type: str, message: str) -> int | None:
    if error_type in _BY_NAME:
        return _BY_NAME[error_type]
    if error_type == "ProviderStatusError":  # the lean client: its message carries the status
        found = _HTTP_STATUS.search(message)
        return int(found.group(1)) if found else None
    return None


def _budget_error(exc: BaseException | None, message: str) -> ApiError:
    """A spent budget, named by the request's own field (``rlm.max_calls``), not the library's."""
    metric = getattr(exc, "metric", None)
    limit, observed = getattr(exc, "limit", None), getattr(exc, "observed", None)
    found = _BUDGET.search(message)
    if metric is None and found:
        metric, limit, observed = found.group(1), found.group(2), found.group(3)
    field, unit = BUDGET_FIELDS.get(str(metric), (str(metric), ""))
    param = f"rlm.{field}"
    text = (
        f"the run's budget '{param}' ({limit} {unit}) was spent (observed {observed}); it is the "
        "request's 'rlm' field, or the server's cap when the request did not lower it"
    )
    if field == "max_seconds":
        return ApiError(504, text, type="timeout_error", code="run_timeout", param=param, retry=False)
    return ApiError(422, text, type="budget_exceeded_error", code="budget_exceeded", param=param, retry=False)
