"""pytest plugin (``-p rlm_compat._dropin_plugin``): alias ``rlm`` to rlm_compat before collection."""

from __future__ import annotations

from .dropin import install_alias

install_alias()
