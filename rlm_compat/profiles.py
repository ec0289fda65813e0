"""Behaviour profiles: each quirk of ysz/recursive-llm 2fb46cc as a named switch.

A :class:`Profile` is plain data handed to the parts that need it (sandbox policy, code preparation,
output collection, the loop); nothing compares profile *names*. ``True`` means "behave like 2fb46cc"
for that one observable behaviour, so ``Profile.upstream()`` has every switch on (but
``inline_by_default``: see there), ``Profile.fixed()`` every switch off, and an ablation study flips
one at a time::

    Profile.upstream().replace(separate_scopes=False)

Security holes are not switches: module escapes, host-state changes, unrestricted ``eval`` and
unbounded hangs are blocked in every profile (see docs/deviations.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

from .errors import ConfigurationError

__all__ = ["DEFAULT_PROFILE_ENV", "QUIRKS", "UPSTREAM_OFF", "Profile", "resolve_profile"]

DEFAULT_PROFILE_ENV = "RLM_COMPAT_PROFILE"


@dataclasses.dataclass(frozen=True)
class Profile:
    """Named quirk switches; see docs/repl.md for the table of what each one does."""

    name: str = "fixed"

    # --- REPL: scoping and RestrictedPython guards -------------------------------------------
    separate_scopes: bool = False
    """exec(code, restricted_globals, env): comprehension bodies, lambdas and functions can't see env."""
    no_inplace_guard: bool = False
    """``x += 1`` fails with ``name '_inplacevar_' is not defined``."""
    no_unpack_guard: bool = False
    """``a, b = 1, 2`` fails with ``name '_unpack_sequence_' is not defined``."""
    no_write_guard: bool = False
    """``l[0] = 5`` / ``del d[k]`` / attribute writes fail with ``name '_write_' is not defined``."""
    no_class_support: bool = False
    """``class A: ...`` fails with ``name '__metaclass__' is not defined``."""
    no_apply_guard: bool = False
    """Calls with ``*args`` / ``**kwargs`` (``print(*xs)``) fail with ``name '_apply_' is not
    defined``."""
    no_getattr_builtin: bool = False
    """Only 2fb46cc's builtin names exist: no ``getattr``, ``dir``, ``object``, ``property``,
    ``classmethod``, ``staticmethod``, ``RecursionError``...; ``hasattr`` answers for any name.
    (``setattr``, ``delattr`` and the common exception classes exist in both.)"""
    imports_refused: bool = False
    """``import re`` fails with ``__import__ not found``; only injected names are usable."""
    rp_utility_builtins: bool = False
    """RestrictedPython's ``utility_builtins`` are injected too: ``string``, ``random`` and
    ``whrandom`` (a per-session generator, never the process-wide one), ``same_type``, ``test``,
    ``reorder``."""
    rp_syntax_only: bool = False
    """Only what RestrictedPython's transformer accepts compiles: annotated assignments
    (``x: int = 1``) and ``nonlocal`` are compile errors. (Off, as Python: also ``match``,
    ``except*``, ``from m import *``, private names, special methods in classes and the
    special names that cannot lead out of the sandbox.)"""
    guarded_iteration: bool = False
    """``for`` / comprehension targets are unpacked through RestrictedPython's
    ``guarded_iter_unpack_sequence`` (slower; some unpacking error texts differ)."""
    str_format_refused: bool = False
    """``'{}'.format(x)`` is refused as RestrictedPython's ``safer_getattr`` does."""
    missing_attr_is_none: bool = False
    """``obj.missing`` evaluates to ``None`` (``safer_getattr``'s default) instead of AttributeError."""

    # --- REPL: output ---------------------------------------------------------------------------
    stale_print_collector: bool = False
    """The ``_print`` collector lands in env and its text is repeated by every later step."""
    print_in_functions_lost: bool = False
    """``print`` inside a function body writes to a collector nobody reads."""
    trailing_line_heuristic: bool = False
    """Last line shown when it contains none of ``= import def class if for while with`` as substrings,
    and it is evaluated a second time (restricted, never a plain eval)."""
    first_fence_only: bool = False
    """Only the first fenced block runs, one tagged ``python`` preferred; other tags are executed as code."""
    upstream_error_text: bool = False
    """Errors read ``Execution error: {message}`` (compile errors wrapped twice), without type or line."""

    # --- where code runs ------------------------------------------------------------------------
    inline_by_default: bool = False
    """Model code runs in the calling process unless ``isolation="process"`` is asked for (2fb46cc
    ran it inline); off: each session runs in a killable, hardened worker process unless
    ``isolation="inline"``. Off in ``upstream`` too: inline, one C call (a catastrophic regex) hangs
    the host and nothing but RestrictedPython stands between model code and the host, a security
    hole never reproduced. On for fidelity and ablation studies (``fixed-with:inline_by_default``,
    ``Profile.upstream().replace(inline_by_default=True)``)."""

    # --- loop -----------------------------------------------------------------------------------
    final_before_exec: bool = False
    """FINAL / FINAL_VAR are checked in the raw response before its code is executed."""
    upstream_parser: bool = False
    """The loop ends runs with upstream's regex parser instead of the fixed ``ast`` parser."""
    minimal_env: bool = False
    """The REPL namespace holds only context, query, recursive_llm and re: no callable ``FINAL`` /
    ``FINAL_VAR`` (NameError when executed) and no ``llm_query``."""

    @classmethod
    def fixed(cls) -> Profile:
        """Every defect fixed: the default."""
        return cls(name="fixed")

    @classmethod
    def upstream(cls) -> Profile:
        """2fb46cc's observable behaviour on the running Python (security holes excepted: its code
        runs in a hardened worker, as in ``fixed``, not in the calling process as 2fb46cc's did)."""
        return cls(name="upstream", **{q: q not in UPSTREAM_OFF for q in QUIRKS})

    @classmethod
    def named(cls, name: str) -> Profile:
        """The preset called ``name``, or one switch-list away from it.

        ``"fixed"`` and ``"upstream"`` are the presets; ``"upstream-without:a,b"`` is upstream with
        switches ``a`` and ``b`` off and ``"fixed-with:a"`` is fixed with ``a`` on, the two forms
        an ablation study names on a command line. The spec itself becomes the profile's name.
        """
        presets = {"fixed": cls.fixed, "upstream": cls.upstream}
        base, sep, switches = name.partition(":")
        forms = {"upstream-without": ("upstream", False), "fixed-with": ("fixed", True)}
        if sep and base in forms:
            preset, value = forms[base]
            wanted = [s.strip() for s in switches.split(",") if s.strip()]
            unknown = sorted(set(wanted) - set(QUIRKS))
            if not wanted or unknown:
                problem = f"unknown switch(es) {unknown}" if unknown else "no switch named"
                raise ConfigurationError(f"profile {name!r}: {problem}; known switches: {sorted(QUIRKS)}")
            return presets[preset]().replace(name=name, **dict.fromkeys(wanted, value))
        try:
            return presets[name]()
        except KeyError:
            raise ConfigurationError(
                f"unknown profile {name!r}; choose one of {sorted(presets)}, "
                "'upstream-without:<switch>[,<switch>...]', 'fixed-with:<switch>[,...]' or pass a Profile"
            ) from None

    def replace(self, **changes: Any) -> Profile:
        """A copy with some switches changed; its name records the change unless one is given."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ConfigurationError(
                f"unknown profile switch(es) {unknown}; known switches: {sorted(QUIRKS)}"
            )
        if "name" not in changes:
            diff = [
                f"{k}={'on' if v else 'off'}" for k, v in sorted(changes.items()) if getattr(self, k) != v
            ]
            changes["name"] = f"{self.name}[{','.join(diff)}]" if diff else self.name
        return dataclasses.replace(self, **changes)

    def quirks(self) -> dict[str, bool]:
        """The switches alone, without the name."""
        return {q: getattr(self, q) for q in QUIRKS}

    def enabled(self) -> Iterator[str]:
        """Names of the switches that are on."""
        return (q for q in QUIRKS if getattr(self, q))


QUIRKS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Profile) if f.name != "name")
UPSTREAM_OFF = frozenset({"inline_by_default"})
"""2fb46cc's switches the ``upstream`` preset leaves off: where code runs is a security boundary,
never reproduced (on for fidelity studies by ``replace`` or ``fixed-with:``)."""


def resolve_profile(profile: str | Profile | None) -> Profile:
    """A Profile from a name, a Profile, or ``None`` (``$RLM_COMPAT_PROFILE``, else ``fixed``)."""
    if isinstance(profile, Profile):
        return profile
    if profile is None:
        profile = os.environ.get(DEFAULT_PROFILE_ENV) or "fixed"
    if not isinstance(profile, str):
        raise ConfigurationError(
            f"profile must be 'fixed', 'upstream' or a Profile, not {type(profile).__name__}"
        )
    return Profile.named(profile)
