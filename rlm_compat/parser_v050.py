"""recursive-llm 0.5.0's directive rules under the names its code imports (``rlm.parser``).

A re-export: the rules are 0.5.0's release behaviour and live in
:mod:`rlm_compat._releases.r050_directive`. Under the alias with ``$RLM_COMPAT_API=0.5`` (see
:mod:`rlm_compat.compat`), ``rlm.parser`` is this module, so code calling 0.5.0's parser
functions directly gets 0.5.0's answers; the module-level functions of :mod:`rlm_compat.parser`
keep 2fb46cc's. Same names, same signatures.
"""

from __future__ import annotations

from ._releases.r050_directive import (
    extract_final,
    extract_final_var,
    extract_final_var_name,
    is_final,
    parse_response,
    resolve_final,
)

__all__ = [
    "extract_final",
    "extract_final_var",
    "extract_final_var_name",
    "is_final",
    "parse_response",
    "resolve_final",
]
