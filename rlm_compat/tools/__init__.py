"""The tooling around the library: the ``rlm-compat`` command and what its subcommands run.

The conformance suite (:mod:`.conformance`), the research comparisons (:mod:`.research`), the
HTML views (:mod:`.view`), replay of recorded runs (:mod:`.replay`), the OpenAI-compatible server
(:mod:`.serve`), the drop-in test runner and the CLI modules; :mod:`.shared` holds what they all
use (the errors, the RLM flags, where files are). Tooling imports the library
(``rlm_compat`` outside this folder); the library never imports tooling, so ``import rlm_compat``
stays small and a user's ``except RLMError`` catches only the library's errors.
"""

from __future__ import annotations

from .shared.tooling_errors import ToolError, ToolUsageError

__all__ = ["ToolError", "ToolUsageError"]
