"""``rlm-compat serve``: an RLM behind an OpenAI-compatible chat-completions endpoint (docs/serve.md).

The server needs the ``serve`` extra (aiohttp); this package's public names are importable without
it, and ``import rlm_compat`` never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import ApiError
from ._models import RLM_KEYS, SCHEME, SERVER_OWNED, ModelRegistry, ModelSpec
from ._protocol import ServeLimits

if TYPE_CHECKING:
    from aiohttp import web

    from ._config import ServerConfig

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
    from ._app import create_app as build

    return build(config)


def __getattr__(name: str) -> Any:
    if name == "ServerConfig":
        from ._config import ServerConfig

        return ServerConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
