"""One frozen :class:`Settings` per RLM, built and validated once from the constructor's arguments.

The loop engine (:mod:`rlm_compat._loop`) reads nothing else: budgets, retries, the REPL's
configuration, the profile and the API preset arrive here checked, and a child RLM is this object
one level deeper (:meth:`Settings.child`), never a copy of the facade.

An RLM option is declared once, in :mod:`.table`. A keyword kept as it is given is a field of
:class:`Settings` declared with :func:`option` (its doc, the constructor's type and default, its
check, what a child RLM makes of it, whether the run record keeps it, its ``rlm-compat run``
flag); the keywords folded into a compound setting (the REPL's configuration, the budget, the
retry policy, the observers) are rows of :data:`FOLDED`. Everything else is derived from those
two: :data:`PARAMETERS` (the constructor's signature, docstring and read-only attributes, the
option tables of :mod:`rlm_compat.options`), :data:`RECORDED` (the run record's ``config``) and
the ``run`` command's flags.
"""

from __future__ import annotations

from .declare import REQUIRED, Flag, Parameter, option
from .table import FOLDED, KEPT, PARAMETERS, RECORDED, Budget, Setting, Settings, build_settings

__all__ = [
    "FOLDED",
    "KEPT",
    "PARAMETERS",
    "RECORDED",
    "REQUIRED",
    "Budget",
    "Flag",
    "Parameter",
    "Setting",
    "Settings",
    "build_settings",
    "option",
]
