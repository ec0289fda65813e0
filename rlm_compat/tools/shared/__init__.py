"""What every command of the tools shares: the tooling's errors (:mod:`.tooling_errors`), the RLM
flags ``run`` and ``serve`` both take (:mod:`.rlm_flags`), reading a context from files, globs or
standard input (:mod:`.run_context`: ``run``, ``replay`` and ``quirks``), the peers' venvs
(:mod:`.peer_venv`) and the package's own paths (:mod:`.package_paths`).

A leaf: it imports only the library, so the command packages and the CLI's table of contents
(:mod:`rlm_compat.tools.cli`, which imports them) can all use it without an import circle.
"""

from __future__ import annotations

__all__: list[str] = []
