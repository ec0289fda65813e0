"""The loop engine below the :class:`~rlm_compat.core.RLM` facade.

:mod:`.engine` runs a tree of nodes from a :class:`~rlm_compat.settings.Settings` and a client;
:mod:`.session` is one node's REPL session and loop; :mod:`.model_call` one model call with its
retries (``Reply | RetryAfter``); :mod:`.final` the FINAL rule set chosen once; :mod:`.namespace`
the REPL namespace contract shared with replay; :mod:`.subcalls` the sub-call provider protocol and
the loop's provider; :mod:`.bridge` the sync/async bridge; :mod:`.tally` 2fb46cc's ``stats`` counts.
"""

from __future__ import annotations

from .bridge import run_sync
from .engine import Engine, ReplFactory
from .final import FinalBox, FinalResolver, choose_resolver
from .model_call import ModelCaller, Reply, RetryAfter
from .namespace import Namespace, build_namespace
from .session import NodeSession, observe, observe_step
from .subcalls import DEPTH_TEXT, LoopSubCalls, SubCallProvider, check_text, query_pairs, texts
from .tally import Tally

__all__ = [
    "DEPTH_TEXT",
    "Engine",
    "FinalBox",
    "FinalResolver",
    "LoopSubCalls",
    "ModelCaller",
    "Namespace",
    "NodeSession",
    "ReplFactory",
    "Reply",
    "RetryAfter",
    "SubCallProvider",
    "Tally",
    "build_namespace",
    "check_text",
    "choose_resolver",
    "observe",
    "observe_step",
    "query_pairs",
    "run_sync",
    "texts",
]
