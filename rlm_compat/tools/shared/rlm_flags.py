"""Command-line flags for RLM keywords, made from the options table (never written by hand).

``rlm-compat run`` offers every keyword whose row declares a :class:`~rlm_compat.settings.Flag`;
``rlm-compat serve`` offers the model and loop ones as its served models' defaults. A keyword added
to the table with a flag appears in both, with its doc as help.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from typing import Any

from ...settings import PARAMETERS, REQUIRED

__all__ = ["GROUPS", "add_rlm_flags", "flag_type", "given_keywords"]

GROUPS: Mapping[str, str] = {
    "model": "model",
    "loop": "loop and REPL",
    "budget": "budget of the whole run tree (exit code 3 when spent)",
    "output": "output",
}
"""Each flag group's title in ``--help``."""


def add_rlm_flags(
    p: argparse.ArgumentParser,
    *,
    groups: Collection[str] = tuple(GROUPS),
    exclude: Collection[str] = (),
) -> dict[str, argparse._ArgumentGroup]:
    """One flag per keyword of ``groups`` that declares one (``exclude``: keywords left out).

    Each flag stores None unless given (the RLM, or the caller, decides the default); its help
    is the flag's own (:attr:`~rlm_compat.settings.declare.Flag.help`) or else the keyword's doc.
    Returns the argument groups by key.
    """
    made = {key: p.add_argument_group(GROUPS[key]) for key in groups}
    for name, row in PARAMETERS.items():
        flag = row.flag
        if flag is None or flag.group not in made or name in exclude:
            continue
        option = flag.option_string(name)
        if flag.is_switch:
            made[flag.group].add_argument(
                option,
                dest=name,
                action="store_const",
                const=flag.const,
                default=None,
                help=flag.help or row.doc,
            )
            continue
        shown = "" if row.default in (None, REQUIRED) else f" (default {row.default})"
        made[flag.group].add_argument(
            option,
            dest=name,
            type=flag_type(row.annotation),
            choices=flag.choices,
            required=flag.required,
            default=None,
            metavar=None if flag.choices else name.upper(),
            help=(flag.help or row.doc) + shown,
        )
    return made


def flag_type(annotation: str) -> type:
    """int, float or str, from the keyword's annotation."""
    first = annotation.split("|")[0].strip()
    return {"int": int, "float": float}.get(first, str)


def given_keywords(args: argparse.Namespace, *, exclude: Collection[str] = ()) -> dict[str, Any]:
    """The RLM keywords whose flags were given (pass :func:`add_rlm_flags`'s ``exclude`` again:
    the parser may use those names for flags of its own)."""
    flagged = (name for name, row in PARAMETERS.items() if row.flag is not None and name not in exclude)
    return {name: value for name in flagged if (value := getattr(args, name, None)) is not None}
