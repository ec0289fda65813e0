"""One REPL step, whichever runner runs it: the step engine and what both runners share.

:mod:`.inline` runs a step (extract the code, compile it restricted, run it under the session's
guards, turn what happened into one observation) in the caller's thread, or inside a worker
process driven by :mod:`..isolate`; :mod:`.hostcall` marks the host functions a namespace holds;
:mod:`.texts` words every observation and error; :mod:`.repl_config` is the sandbox's
configuration. Below the worker (:mod:`..isolate` imports this package, never the reverse) and
above the restriction layer (:mod:`..restrict`).
"""

from __future__ import annotations

__all__: list[str] = []
