"""One module per release of ysz/recursive-llm, and the :class:`Release` an RLM's settings select.

:mod:`.r2fb46cc` (2fb46cc / cc7a826, the default) and :mod:`.r050` (PyPI 0.5.0) each hold what
their release decides; :class:`~.selected.Release` is what the engine asks (``settings.release``).
A release's data is an :class:`~.contract.ApiSemantics` preset its module registers (users
import the class from :mod:`rlm_compat.compat` and pass a preset as ``api=``).
"""

from __future__ import annotations

from . import r050, r2fb46cc
from .contract import ApiSemantics
from .selected import FinalRule, Release, select_release

__all__ = ["ApiSemantics", "FinalRule", "Release", "r050", "r2fb46cc", "select_release"]
