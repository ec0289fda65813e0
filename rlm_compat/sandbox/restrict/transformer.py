"""The compile-time policy: RestrictedPython's transformer with 2fb46cc's gaps as switches.

:class:`SandboxTransformer` refuses ``_`` names, ``exec``/``eval``, ``async`` and unknown syntax,
and rewrites attribute access, writes and ``print`` into calls of the runtime guards (each
switch of :class:`CompileOptions`, read from the Profile once, restores one of 2fb46cc's
gaps). It only judges and rewrites into guard calls; what must come after the check (the shown
last value, deadline ticks, size guards) is :mod:`.rewrites`, and the pipeline is :mod:`.prep`.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from typing import Any

from RestrictedPython.transformer import FORBIDDEN_FUNC_NAMES, RestrictingNodeTransformer, copy_locations

from ...profiles import Profile
from .cpython_bugs import except_star_is_safe
from .names import BLOCKED_ATTRIBUTES, CLASS_DUNDERS, REFUSED_DUNDERS, private_name_allowed

__all__ = ["CompileIssue", "CompileOptions", "SandboxTransformer"]


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """The compile-time reading of a Profile."""

    first_fence_only: bool = False
    module_print_collector: bool = False
    function_print_collector: bool = False
    rp_augassign: bool = False
    rp_unpack: bool = False
    rp_apply: bool = False
    guarded_iteration: bool = False
    rp_syntax_only: bool = False
    trailing_line_heuristic: bool = False
    fast_plain_attributes: bool = True

    @classmethod
    def from_profile(cls, p: Profile) -> CompileOptions:
        return cls(
            first_fence_only=p.first_fence_only,
            module_print_collector=p.stale_print_collector,
            function_print_collector=p.print_in_functions_lost,
            rp_augassign=p.no_inplace_guard,
            rp_unpack=p.no_unpack_guard,
            rp_apply=p.no_apply_guard,
            guarded_iteration=p.guarded_iteration,
            rp_syntax_only=p.rp_syntax_only,
            trailing_line_heuristic=p.trailing_line_heuristic,
            fast_plain_attributes=not p.missing_attr_is_none,
        )


@dataclasses.dataclass(frozen=True)
class CompileIssue:
    """One compile-time refusal: ``kind`` is ``"syntax"``, ``"late-syntax"`` or ``"policy"``."""

    kind: str
    line: int | None
    message: str
    upstream_text: str


class SandboxTransformer(RestrictingNodeTransformer):
    """RestrictedPython's policy, with 2fb46cc's gaps as switches and a faster fixed mode."""

    def __init__(self, opts: CompileOptions) -> None:
        super().__init__()
        self.opts = opts
        self.issues: list[CompileIssue] = []
        self._collector_modes = [opts.module_print_collector]
        self._scopes = ["module"]
        self._class_names: list[str] = []

    def error(self, node: ast.AST, info: str) -> None:
        super().error(node, info)
        line = getattr(node, "lineno", None)
        self.issues.append(CompileIssue("policy", line, info, self.errors[-1]))

    def _collecting(self) -> bool:
        return self._collector_modes[-1]

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is not None and not self.opts.rp_syntax_only:
            if name.startswith("_") and _name_allowed(name, self._scopes[-1], node):
                return
            if name == "printed" and not self._collecting():
                return
        super().check_name(node, name, allow_magic_methods)

    def _scoped(self, kind: str, node: Any, class_name: str | None = None) -> Any:
        self._scopes.append(kind)
        if class_name is not None:
            self._class_names.append(class_name)
        try:
            return self.node_contents_visit(node)
        finally:
            self._scopes.pop()
            if class_name is not None:
                self._class_names.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        if self.opts.rp_syntax_only:
            return super().visit_ClassDef(node)
        self.check_name(node, node.name)
        if any(k.arg == "metaclass" for k in node.keywords):
            self.error(node, 'The keyword argument "metaclass" is not allowed.')
        self._scoped("class", node, node.name)
        node.keywords = [*node.keywords, ast.keyword("metaclass", ast.Name("__metaclass__", ast.Load()))]
        meta = node.keywords[-1]
        ast.copy_location(meta, node)
        ast.copy_location(meta.value, node)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        if self.opts.rp_syntax_only:
            return super().visit_Lambda(node)
        self.check_function_argument_names(node)
        return self._scoped("function", node)

    def _refuse_async(self, node: ast.AST) -> Any:
        if self.opts.rp_syntax_only:
            self.not_allowed(node)
            return None
        self.error(node, _ASYNC_REFUSED)
        return None

    visit_AsyncFunctionDef = _refuse_async
    visit_Await = _refuse_async
    visit_AsyncFor = _refuse_async
    visit_AsyncWith = _refuse_async

    # --- match statements (fixed profile only; RestrictedPython refuses them) ---------------

    def visit_Match(self, node: ast.Match) -> Any:
        if self.opts.rp_syntax_only:
            return self.generic_visit(node)
        return self.node_contents_visit(node)

    def visit_match_case(self, node: ast.match_case) -> Any:
        return self.node_contents_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue) -> Any:
        if isinstance(node.value, ast.Attribute):
            self._pattern_names(node.value)
            return node
        return self.node_contents_visit(node)

    def visit_MatchSingleton(self, node: ast.MatchSingleton) -> Any:
        return node

    def visit_MatchSequence(self, node: ast.MatchSequence) -> Any:
        return self.node_contents_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> Any:
        self.check_name(node, node.name)
        return node

    def visit_MatchMapping(self, node: ast.MatchMapping) -> Any:
        self.check_name(node, node.rest)
        for key in node.keys:
            if isinstance(key, ast.Attribute):
                self._pattern_names(key)
        node.patterns = [self.visit(p) for p in node.patterns]
        return node

    def visit_MatchClass(self, node: ast.MatchClass) -> Any:
        self._pattern_names(node.cls)
        for attr in node.kwd_attrs:
            if attr.startswith("_") and attr not in _PATTERN_DUNDERS:
                self.error(
                    node,
                    f'"{attr}" is an invalid attribute name in a class pattern because it starts with "_".',
                )
        node.patterns = [self.visit(p) for p in node.patterns]
        node.kwd_patterns = [self.visit(p) for p in node.kwd_patterns]
        return node

    def visit_MatchAs(self, node: ast.MatchAs) -> Any:
        self.check_name(node, node.name)
        return self.node_contents_visit(node)

    def visit_MatchOr(self, node: ast.MatchOr) -> Any:
        return self.node_contents_visit(node)

    def _pattern_names(self, expr: ast.expr) -> None:
        """A dotted name in a pattern (``case Color.RED``): read natively, so vetted here and
        read through the guards before the ``match`` (see :class:`_MatchValues`)."""
        while isinstance(expr, ast.Attribute):
            if expr.attr.startswith("_") or expr.attr in BLOCKED_ATTRIBUTES:
                self.error(expr, f'"{expr.attr}" is not allowed in a pattern.')
            expr = expr.value
        if isinstance(expr, ast.Name):
            self.check_name(expr, expr.id)

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in FORBIDDEN_FUNC_NAMES and not self._collecting():
            if node.id == "print" and isinstance(node.ctx, ast.Load):
                new = ast.Name("_rlm_print_", ast.Load())
                copy_locations(new, node)
                return new
            if node.id == "printed":
                return node
        return super().visit_Name(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        collecting = self.opts.function_print_collector
        self._collector_modes.append(collecting)
        self._scopes.append("function")
        try:
            with self.print_info.new_print_scope():
                node = self.node_contents_visit(node)
                if collecting:
                    self.inject_print_collector(node)
        finally:
            self._collector_modes.pop()
            self._scopes.pop()
        return node

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        if _is_super_init(node) and not self.opts.rp_syntax_only:
            # ``super().__init__(...)``: the one dunder read allowed, on a super() object only.
            read = ast.Call(
                func=ast.Name("_getattr_", ast.Load()),
                args=[self.visit(node.value), ast.Constant(node.attr)],
                keywords=[],
            )
            copy_locations(read, node)
            return read
        if node.attr in BLOCKED_ATTRIBUTES and node.attr not in _RP_INSPECT:
            self.error(node, f'"{node.attr}" is a restricted name in the sandbox.')
        if node.attr.startswith("_") and node.attr != "_" and not self.opts.rp_syntax_only:
            return self._special_attribute(node)
        new = super().visit_Attribute(node)
        if (
            isinstance(new, ast.Call)
            and node.attr in ("format", "format_map")
            and isinstance(new.func, ast.Name)
        ):
            new.func.id = "_rlm_getattr_format_"
        return new

    def _special_attribute(self, node: ast.Attribute) -> Any:
        """``obj._x`` / ``obj.__x__``: reads go through ``_rlm_special_`` (see
        guards.special_getattr); writes of private names through ``_write_``; never a special
        name written, nor one of :data:`~.names.REFUSED_DUNDERS` read."""
        attr = node.attr
        dunder = attr.startswith("__") and attr.endswith("__")
        if attr.startswith("__") and not dunder and self._class_names:
            attr = f"_{self._class_names[-1].lstrip('_')}{attr}"  # Python's private name mangling
        if attr in REFUSED_DUNDERS:
            self.error(node, f'"{attr}" is a restricted name in the sandbox.')
            return node
        if isinstance(node.ctx, ast.Load):
            new = ast.Call(
                func=ast.Name("_rlm_special_", ast.Load()),
                args=[self.visit(node.value), ast.Constant(attr)],
                keywords=[],
            )
            copy_locations(new, node)
            return new
        if dunder:
            self.error(node, f'"{attr}" cannot be assigned or deleted in the sandbox.')
            return node
        target = ast.Call(func=ast.Name("_write_", ast.Load()), args=[self.visit(node.value)], keywords=[])
        copy_locations(target, node.value)
        new_attr = ast.Attribute(value=target, attr=attr, ctx=node.ctx)
        copy_locations(new_attr, node)
        return new_attr

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        if not self.opts.rp_syntax_only and [a.name for a in node.names] == ["*"]:
            return node  # binds the public names of an allowlisted module's proxy, as Python does
        return super().visit_ImportFrom(node)

    def visit_TryStar(self, node: Any) -> Any:
        if self.opts.rp_syntax_only:
            return self.generic_visit(node)
        if not except_star_is_safe():
            self.error(node, _except_star_refused())
            return node
        return self.node_contents_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        # Reads need no guard (``_getitem_`` would be plain ``obj[key]``); writes keep ``_write_``.
        if isinstance(node.ctx, ast.Load):
            return self.node_contents_visit(node)
        return super().visit_Subscript(node)

    def guard_iter(self, node: Any) -> Any:
        if self.opts.guarded_iteration:
            return super().guard_iter(node)
        return self.node_contents_visit(node)

    def visit_Call(self, node: ast.Call) -> Any:
        if self.opts.rp_apply:
            return super().visit_Call(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
            self.error(node, f"{node.func.id.capitalize()} calls are not allowed.")
        return self.node_contents_visit(node)

    def visit_Assign(self, node: ast.Assign) -> Any:
        if self.opts.rp_unpack:
            return super().visit_Assign(node)
        return self.node_contents_visit(node)

    def visit_With(self, node: ast.With) -> Any:
        if self.opts.rp_unpack:
            return super().visit_With(node)
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        if self.opts.rp_augassign:
            return super().visit_AugAssign(node)
        # Native ``x += 1``; item and attribute targets go through ``_write_`` like assignments.
        return self.node_contents_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        if self.opts.rp_syntax_only:
            return super().generic_visit(node)
        if self._scopes[-1] == "class":
            # kept: the class's __annotations__ are what dataclasses and NamedTuple read
            return self.node_contents_visit(node)
        new: ast.stmt
        if node.value is None:
            new = ast.Pass()
            self.visit(node.target)
        else:
            new = ast.Assign(targets=[node.target], value=node.value)
        copy_locations(new, node)
        return self.visit(new) if isinstance(new, ast.Assign) else new

    def visit_Nonlocal(self, node: ast.Nonlocal) -> Any:
        if self.opts.rp_syntax_only:
            return super().visit_Nonlocal(node)
        return node


_RP_INSPECT = frozenset(BLOCKED_ATTRIBUTES - {"mro"})

_PATTERN_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})
"""Special names a class pattern may read (natively): descriptive strings only."""


def _except_star_refused() -> str:
    version = ".".join(map(str, sys.version_info[:3]))
    return (
        f"try/except* is not allowed in the sandbox on Python {version}: before CPython 3.12.9 / 3.13.2 "
        "(gh-128049) except* has a type confusion that sandboxed code could use to escape (the cause of "
        "CVE-2025-22153). Catch the group with `except ExceptionGroup as eg:` and look at eg.exceptions."
    )


_ASYNC_REFUSED = (
    "async def / await / async for / async with are not supported in the sandbox: no event loop "
    "runs model code, so a coroutine could never be awaited; write plain functions."
)


def _name_allowed(name: str, scope: str, node: Any) -> bool:
    """Names starting with ``_`` that sandboxed code may bind and read (fixed profile).

    Private names (``_cache``, ``__x``) anywhere except the guards' own (they end with ``_``,
    as ``_getattr_`` / ``_write_``, or are ``_print`` / ``_rlm...``); special names defined in a
    class body (``def __repr__``, ``__radd__ = __add__``, ``__slots__``) except those that lead
    out or let code run where the host does not expect it; ``__name__`` (``'__main__'``) and the
    ``__class__`` cell of a method.
    """
    if name.startswith("__") and name.endswith("__"):
        if name in REFUSED_DUNDERS:
            return False
        if name in ("__name__", "__class__") and isinstance(getattr(node, "ctx", None), ast.Load):
            return True
        return scope == "class" and (name in CLASS_DUNDERS or isinstance(node, ast.FunctionDef))
    return private_name_allowed(name)


def _is_super_init(node: ast.Attribute) -> bool:
    value = node.value
    return (
        node.attr == "__init__"
        and isinstance(node.ctx, ast.Load)
        and isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )
