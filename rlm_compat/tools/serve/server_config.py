"""What a server process is started with, and the redaction of secrets in what leaves it."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field

from ..shared.tooling_errors import ToolUsageError
from .chat_protocol import ServeLimits
from .models import ModelRegistry
from .records import DEFAULT_KEEP_BYTES, DEFAULT_KEEP_RUNS
from .sessions import SessionLimits

__all__ = ["RedactingFormatter", "Redactor", "ServerConfig"]

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


@dataclass(frozen=True)
class ServerConfig:
    """Everything a server process is started with (the CLI builds one; tests can too)."""

    registry: ModelRegistry
    limits: ServeLimits = field(default_factory=ServeLimits)
    api_key_env: str | None = None
    documents_root: str | None = None
    trajectory_dir: str | None = None
    redact_trajectories: bool = False
    trajectory_keep_runs: int = DEFAULT_KEEP_RUNS
    trajectory_keep_bytes: int = DEFAULT_KEEP_BYTES
    heartbeat_seconds: float = 15.0
    shutdown_grace: float = 5.0
    sessions: SessionLimits = field(default_factory=SessionLimits)

    def bearer(self) -> str | None:
        """The token clients must send, read from ``api_key_env`` (unset variable: an error)."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ToolUsageError(f"--api-key-env {self.api_key_env}: that environment variable is not set")
        return value


class Redactor:
    """Replaces secret values (provider keys, the server's token) in anything that leaves the process."""

    def __init__(self, names: list[str]) -> None:
        values = {os.environ.get(n, "") for n in names}
        values |= {v for k, v in os.environ.items() if _SECRET_NAME.search(k)}
        self._secrets = sorted((v for v in values if len(v) >= 8), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text


class RedactingFormatter(logging.Formatter):
    """A log formatter whose output (tracebacks included) never carries a secret."""

    def __init__(self, redact: Redactor, fmt: str) -> None:
        super().__init__(fmt)
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))
