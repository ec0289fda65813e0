"""The one place a grid learns which suite a name means and which client a cell uses.

``--suite NAME`` is a built-in suite (:mod:`rlm_compat.tools.research.suites`); ``--suite
package.module:attr`` is your own (a Suite, or a callable returning one), which is how a study
adds tasks without touching the package. The scripted model's client is the task's policy
(:mod:`rlm_compat.tools.research.task_policies`); a litellm model name gets no client (the RLM's own).
"""

from __future__ import annotations

import importlib
from typing import Any

from ....clients import LLMClient
from ...shared.tooling_errors import ToolUsageError
from ..base import RunSpec, Suite, TaskInstance
from ..suites import load_suite
from ..task_policies import client_for
from .grid import SCRIPTED, PolicyFactory

__all__ = ["default_policy", "load_object", "resolve_policy", "resolve_suite"]


def load_object(reference: str) -> Any:
    """``package.module:attr`` (dotted attr allowed): the object it names."""
    module_name, sep, attr = reference.partition(":")
    if not sep or not module_name or not attr:
        raise ToolUsageError(f"{reference!r} is not 'package.module:attribute'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolUsageError(f"cannot import {module_name!r} for {reference!r}: {exc}") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ToolUsageError(f"{module_name!r} has no attribute {attr!r}") from None
    return target


def resolve_suite(name: str) -> Suite:
    """The suite ``--suite`` names: ``package.module:attr``, or a built-in suite name, optionally
    with a seed count (``quick*3``: every task with seeds 0, 1 and 2)."""
    if ":" in name:
        found = load_object(name)
        suite = found() if callable(found) and not isinstance(found, Suite) else found
        if not isinstance(suite, Suite):
            raise ToolUsageError(f"{name!r} is not a Suite (needs name, version and tasks())")
        return suite
    base, star, count = name.partition("*")
    if not star:
        return load_suite(name)
    if not count.isdigit():
        raise ToolUsageError(f"suite {name!r}: write NAME*SEEDS with a whole number, e.g. 'quick*3'")
    return load_suite(base, seeds=int(count))


def default_policy(task: TaskInstance, spec: RunSpec) -> LLMClient | None:
    """The task's scripted policy for model ``scripted`` (variant = run index); else litellm."""
    if spec.model != SCRIPTED:
        return None
    return client_for(task, spec.model, variant=spec.run_index)


def resolve_policy(reference: str | None) -> PolicyFactory:
    """``--policy package.module:attr`` (a ``(task, spec) -> client`` callable) or the default."""
    if reference is None:
        return default_policy
    factory = load_object(reference)
    if not callable(factory):
        raise ToolUsageError(f"{reference!r} is not a callable (task, spec) -> client")
    policy: PolicyFactory = factory
    return policy
