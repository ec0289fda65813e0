"""pytest plugin (``-p rlm_compat._dropin_plugin``): alias ``rlm`` to rlm_compat before collection.

Loaded before any test module or conftest is imported, so no copy of the suite's own ``rlm``
package is ever imported; the alias also reaches processes the tests start (see
:mod:`rlm_compat.dropin`).
"""

from __future__ import annotations

from .dropin import install_alias

install_alias()
