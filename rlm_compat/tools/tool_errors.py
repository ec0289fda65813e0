"""The tooling's errors under their first name, for the conformance recorder's own files.

The errors live in :mod:`rlm_compat.tools.shared.tooling_errors`. The recorder's files
(``conformance/recorder.py``, ``inputs.py``, ``protocol.py``, ``fixtures.py``) still import them from
here because the recorded fixtures' provenance hashes those files byte for byte: they move to
``..shared.tooling_errors`` with the next re-recording, and this module goes with them.
"""

from __future__ import annotations

from .shared.tooling_errors import ToolError, ToolUsageError

__all__ = ["ToolError", "ToolUsageError"]
