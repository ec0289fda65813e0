"""``rlm-compat serve``: an RLM behind an OpenAI-compatible chat-completions endpoint (docs/serve.md).

The server needs the ``serve`` extra (aiohttp); this package's public names are importable without
it, and ``import rlm_compat`` never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api_errors import ApiError
from .chat_protocol import ServeLimits
from .models import RLM_KEYS, SCHEME, SERVER_OWNED, ModelRegistry, ModelSpec

if TYPE_CHECKING:
    from aiohttp import web

    from .server_config import ServerConfig

__all__ = [
    "RLM_KEYS",
    "SCHEME",
    "SERVER_OWNED",
    "ApiError",
    "ModelRegistry",
    "ModelSpec",
    "ServeLimits",
    "ServerConfig",
    "create_app",
]


def create_app(config: ServerConfig) -> web.Application:
    """The aiohttp application for ``config`` (imports aiohttp)."""
    from .app import create_app as build

    return build(config)


def __getattr__(name: str) -> Any:
    if name == "ServerConfig":
        from .server_config import ServerConfig

        return ServerConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
