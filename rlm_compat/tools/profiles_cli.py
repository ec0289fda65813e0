"""``rlm-compat profiles``: each quirk switch, whether the presets turn it on, and what it does.

The descriptions are the switches' attribute docstrings in :mod:`rlm_compat.profiles`, read from its
source, so the table cannot drift from the code.
"""

from __future__ import annotations

import argparse
import itertools

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``profiles`` to the main CLI's subparsers."""
    p = commands.add_parser(
        "profiles",
        help="list the behaviour profiles and their quirk switches",
        description="Show each quirk switch, whether the presets turn it on, and what it does.",
    )
    p.set_defaults(handler=_profiles)


def _profiles(args: argparse.Namespace) -> int:
    from ..profiles import QUIRKS, Profile

    fixed, upstream = Profile.fixed(), Profile.upstream()
    docs = _switch_docs()
    width = max(len(q) for q in QUIRKS)
    print(f"{'switch':<{width}}  fixed  upstream  what it does (when on)")
    for name in QUIRKS:
        doc = docs.get(name, "")
        print(
            f"{name:<{width}}  {'on' if getattr(fixed, name) else 'off':<5}  "
            f"{'on' if getattr(upstream, name) else 'off':<8}  {doc}"
        )
    return 0


def _switch_docs() -> dict[str, str]:
    """Each switch's attribute docstring, read from the source of profiles.py."""
    import ast
    import inspect

    from .. import profiles

    tree = ast.parse(inspect.getsource(profiles.Profile))
    body = tree.body[0].body  # type: ignore[attr-defined]
    return {
        node.target.id: " ".join(str(following.value.value).split())
        for node, following in itertools.pairwise(body)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
    }
