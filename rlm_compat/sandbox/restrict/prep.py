"""From a model's response to restricted bytecode: fences, the transformer, compile-time limits.

Steps, each driven by :class:`CompileOptions` (derived from the Profile once):

1. :func:`extract` picks the code out of the response (every runnable fence in order, or 2fb46cc's
   first-fence rule) and remembers where each line came from.
2. :class:`SandboxTransformer` is RestrictedPython's transformer with the switches applied: it
   refuses ``_`` names, ``exec``/``eval`` and unknown syntax, and rewrites attribute access,
   writes and ``print`` into guard calls.
3. :func:`_finish_tree` adds what must come after the policy check: the display of the last
   expression, a deadline tick at the top of every ``except`` body, and size guards on ``**`` /
   ``<<`` / risky ``*``.

Compiled programs are cached by (source, options).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
import sys
import threading
from collections import OrderedDict
from types import CodeType
from typing import Any, ClassVar

from RestrictedPython.transformer import (
    FORBIDDEN_FUNC_NAMES,
    RestrictingNodeTransformer,
    copy_locations,
)

from ...profiles import Profile
from ..fences import describe_line, fenced_blocks, line_map, traceback_line
from .cpython_bugs import except_star_is_safe
from .names import BLOCKED_ATTRIBUTES, CLASS_DUNDERS, REFUSED_DUNDERS, private_name_allowed
from .warnguard import quiet_compile

__all__ = [
    "CompileIssue",
    "CompileOptions",
    "Compiled",
    "Program",
    "compile_program",
    "describe_line",
    "extract",
    "user_line",
]

_PY310 = sys.version_info < (3, 11)


@functools.cache
def _rp9() -> bool:
    """RestrictedPython 9 words a null-byte error differently (asked late: importlib.metadata is slow)."""

    from importlib import metadata

    return int(metadata.version("RestrictedPython").split(".")[0]) >= 9


_TRAILING_KEYWORDS = ("=", "import", "def", "class", "if", "for", "while", "with")


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


# --- 1. extraction ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Program:
    """The code to run and, per program line, ``(block number, line in block)`` (1-based)."""

    source: str
    line_map: tuple[tuple[int, int], ...]
    blocks: int


def extract(text: str, first_fence_only: bool) -> Program:
    """The code in a response (see the module docstring for the two rules)."""
    if first_fence_only:
        code = _first_fence(text)
        return Program(code, _identity_map(code), 1)
    blocks = fenced_blocks(text)
    if blocks is None:
        return Program(text, _identity_map(text), 1)
    return Program("\n".join(blocks), line_map(blocks), len(blocks))


def _identity_map(code: str) -> tuple[tuple[int, int], ...]:
    return ()


def _first_fence(text: str) -> str:
    """2fb46cc's rule: the first ```` ```python ```` block, else the first fence of any kind with
    its tag left in the code, else the whole text."""
    tagged = "```python"
    if tagged in text:
        start = text.find(tagged) + len(tagged)
        end = text.find("```", start)
        if end != -1:
            return text[start:end].strip()
    if "```" in text:
        start = text.find("```") + 3
        end = text.find("```", start)
        if end != -1:
            return text[start:end].strip()
    return text


# --- 2. the transformer -------------------------------------------------------------------------


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


class _ZeroArgSuper(ast.NodeTransformer):
    """``super()`` in a method becomes ``super(__class__, <first argument>)``.

    The sandbox's ``super`` is a guard function, and a function cannot find the caller's class
    cell by itself; the compiler still creates the ``__class__`` cell for the method.
    """

    def __init__(self) -> None:
        self._first_arg: list[str | None] = [None]

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                args = stmt.args.posonlyargs + stmt.args.args
                self._first_arg.append(args[0].arg if args else None)
                self.generic_visit(stmt)
                self._first_arg.pop()
            else:
                self._first_arg.append(None)
                self.visit(stmt)
                self._first_arg.pop()
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        self._first_arg.append(None)
        self.generic_visit(node)
        self._first_arg.pop()
        return node

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        self._first_arg.append(None)
        self.generic_visit(node)
        self._first_arg.pop()
        return node

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        first = self._first_arg[-1]
        if (
            first is not None
            and isinstance(node.func, ast.Name)
            and node.func.id == "super"
            and not node.args
            and not node.keywords
        ):
            node.args = [
                ast.copy_location(ast.Name("__class__", ast.Load()), node),
                ast.copy_location(ast.Name(first, ast.Load()), node),
            ]
        return node


# --- 3. finishing passes ------------------------------------------------------------------------


def _call(name: str, args: list[ast.expr], like: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Name(name, ast.Load()), args=args, keywords=[])
    copy_locations(call, like)  # type: ignore[arg-type]
    return call


def _small_number(node: ast.AST) -> bool:
    """A numeric literal that cannot make a product huge (``i * 2``, ``x * 0.5``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if not isinstance(node, ast.Constant):
        return False
    v = node.value
    if type(v) in (float, complex):
        return True
    return isinstance(v, int) and abs(v) < 1 << 16


def _risky_product(left: ast.AST, right: ast.AST) -> bool:
    """Every ``*`` may build a huge result unless one side is a small number literal."""
    return not (_small_number(left) or _small_number(right))


class _SizeGuards(ast.NodeTransformer):
    """``**``, ``<<`` and ``*`` (unless by a small number literal) become size-checked calls."""

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        risky_mul = isinstance(node.op, ast.Mult) and _risky_product(node.left, node.right)
        self.generic_visit(node)
        guard = _guard_for(node.op, risky_mul)
        if guard is None:
            return node
        return _call(guard, [node.left, node.right], node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        risky_mul = isinstance(node.op, ast.Mult) and not _small_number(node.value)
        self.generic_visit(node)
        guard = _guard_for(node.op, risky_mul)
        if guard is None or not isinstance(node.target, ast.Name):
            return node
        load = ast.Name(node.target.id, ast.Load())
        copy_locations(load, node.target)
        new = ast.Assign(targets=[node.target], value=_call(guard, [load, node.value], node))
        copy_locations(new, node)
        return new


def _guard_for(op: ast.operator, risky_mul: bool) -> str | None:
    if isinstance(op, ast.Pow):
        return "_rlm_pow_"
    if isinstance(op, ast.LShift):
        return "_rlm_lshift_"
    if isinstance(op, ast.Mult) and risky_mul:
        return "_rlm_mul_"
    return None


def _is_generator(fn: ast.FunctionDef) -> bool:
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return False


class _HandlerTicks(ast.NodeTransformer):
    """A deadline tick first in every ``except`` and ``finally`` body.

    Those are the places that can swallow the injected timeout (``except BaseException: pass``,
    ``finally: continue`` / ``return``); a tick raising there propagates instead. Inside
    generator functions the tick also ends a generator being closed outside any execution (or
    after its deadline), so its cleanup code cannot hang whoever drops the last reference.
    """

    def __init__(self) -> None:
        self._generator = [False]

    def _tick(self, like: ast.AST) -> ast.stmt:
        name = "_rlm_gtick_" if self._generator[-1] else "_rlm_tick_"
        tick = ast.Expr(_call(name, [], like))
        copy_locations(tick, like)  # type: ignore[arg-type]
        return tick

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        self._generator.append(_is_generator(node))
        try:
            self.generic_visit(node)
        finally:
            self._generator.pop()
        return node

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        self._generator.append(False)
        try:
            self.generic_visit(node)
        finally:
            self._generator.pop()
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> Any:
        self.generic_visit(node)
        node.body.insert(0, self._tick(node))
        return node

    def visit_Try(self, node: Any) -> Any:
        self.generic_visit(node)
        if node.finalbody:
            node.finalbody.insert(0, self._tick(node.finalbody[0]))
        return node

    visit_TryStar = visit_Try

    def visit_While(self, node: ast.While) -> Any:
        self.generic_visit(node)
        if _PY310 and isinstance(node.body[0], ast.Try):
            # CPython 3.10 skips pending-signal checks (and GIL hand-offs) when a jump lands on
            # SETUP_FINALLY: `while True: try: ...` would never see the timeout, nor let the
            # watchdog thread run.
            node.body.insert(0, self._tick(node.body[0]))
        return node


class _MatchValues(ast.NodeTransformer):
    """Dotted names in patterns (``case Color.RED``, ``case mod.Point(x=0)``) are read natively
    by the match machinery, and a value pattern hands the value to the subject's ``__eq__``.
    So they are read through the guards just before the ``match`` statement, into a holder the
    patterns then name (``case _rlm_mv_1.v0``), deleted afterwards."""

    def __init__(self) -> None:
        self._count = 0

    def visit_Match(self, node: ast.Match) -> Any:
        self.generic_visit(node)
        reads: list[ast.expr] = []
        holder = f"_rlm_mv_{self._count}"
        for pattern in ast.walk(node):
            if isinstance(pattern, ast.MatchValue) and isinstance(pattern.value, ast.Attribute):
                pattern.value = self._swap(pattern.value, holder, reads)
            elif isinstance(pattern, ast.MatchClass) and isinstance(pattern.cls, ast.Attribute):
                pattern.cls = self._swap(pattern.cls, holder, reads)
            elif isinstance(pattern, ast.MatchMapping):
                pattern.keys = [
                    self._swap(k, holder, reads) if isinstance(k, ast.Attribute) else k for k in pattern.keys
                ]
        if not reads:
            return node
        self._count += 1
        store = ast.Assign(
            targets=[ast.Name(holder, ast.Store())], value=_call("_rlm_patterns_", reads, node)
        )
        drop = ast.Delete(targets=[ast.Name(holder, ast.Del())])
        guarded = ast.Try(body=[node], handlers=[], orelse=[], finalbody=[drop])
        for new in (store, drop, guarded):
            copy_locations(new, node)
        return [store, ast.fix_missing_locations(guarded)]

    @staticmethod
    def _swap(expr: ast.Attribute, holder: str, reads: list[ast.expr]) -> ast.Attribute:
        reads.append(_guarded_chain(expr))
        new = ast.Attribute(value=ast.Name(holder, ast.Load()), attr=f"v{len(reads) - 1}", ctx=ast.Load())
        return ast.fix_missing_locations(ast.copy_location(new, expr))


def _guarded_chain(expr: ast.expr) -> ast.expr:
    if isinstance(expr, ast.Attribute):
        return _call("_getattr_", [_guarded_chain(expr.value), ast.Constant(expr.attr)], expr)
    return expr


class _RenameGuards(ast.NodeTransformer):
    """For 2fb46cc's second evaluation: a missing attribute raises, as a plain ``eval`` would."""

    _MAP: ClassVar[dict[str, str]] = {
        "_getattr_": "_rlm_getattr_strict_",
        "_rlm_getattr_format_": "_rlm_getattr_format_strict_",
    }

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in self._MAP:
            node.id = self._MAP[node.id]
        return node


class _FastPlain(ast.NodeTransformer):
    """Native access when the receiver is a plain builtin value, the guard otherwise.

    ``name.attr`` (already ``_getattr_(name, 'attr')``) becomes
    ``name.attr if type(name) in PLAIN else _getattr_(name, 'attr')``, and ``_write_(name)[k] = v``
    skips the guard for an exact dict or list. For exact str / list / dict / int... the guard
    could only return ``getattr(obj, attr)`` (no attribute of theirs is a module, ``format`` keeps
    its own guard), so this changes nothing but the cost of a hot ``ch.isdigit()``.
    """

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        func, args = node.func, node.args
        if not (isinstance(func, ast.Name) and len(args) in (1, 2) and not node.keywords):
            return node
        receiver = args[0]
        if not (isinstance(receiver, ast.Name) and isinstance(receiver.ctx, ast.Load)):
            return node
        name = args[1].value if len(args) == 2 and isinstance(args[1], ast.Constant) else None
        if func.id == "_getattr_" and isinstance(name, str):
            fast: ast.expr = ast.Attribute(value=ast.Name(receiver.id, ast.Load()), attr=name, ctx=ast.Load())
            kinds = "_rlm_plain_types_"
        elif func.id == "_write_" and len(args) == 1:
            fast = ast.Name(receiver.id, ast.Load())
            kinds = "_rlm_writable_types_"
        else:
            return node
        test = ast.Compare(
            left=_call("_rlm_type_", [ast.Name(receiver.id, ast.Load())], node),
            ops=[ast.In()],
            comparators=[ast.Name(kinds, ast.Load())],
        )
        new = ast.IfExp(test=test, body=fast, orelse=node)
        copy_locations(new, node)
        return new


def _finish_tree(tree: ast.Module, opts: CompileOptions, source: str) -> ast.Module:
    # Each pass walks the whole tree; the source tells cheaply which ones can change anything.
    if opts.fast_plain_attributes and "." in source:
        tree = _FastPlain().visit(tree)
    if "super" in source:
        tree = _ZeroArgSuper().visit(tree)
    if "match" in source and not opts.rp_syntax_only:
        tree = _MatchValues().visit(tree)
    if "*" in source or "<<" in source or "pow" in source:
        tree = _SizeGuards().visit(tree)
    if "except" in source or "finally" in source or (_PY310 and "while" in source):
        tree = _HandlerTicks().visit(tree)
    if not opts.trailing_line_heuristic and tree.body:
        last = tree.body[-1]
        if isinstance(last, ast.Expr):
            last.value = _call("_rlm_show_", [last.value], last.value)
        first = tree.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            # A leading string would become the module docstring and put __doc__ into env.
            guard = ast.Pass()
            copy_locations(guard, first)
            tree.body.insert(0, guard)
    return tree  # every node made above got its location when it was made


# --- compile + cache ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A compiled program, or the reasons it was refused."""

    code: CodeType | None
    trailing: CodeType | None
    issues: tuple[CompileIssue, ...]
    filename: str


_SYNTAX_TEMPLATE = "Line {lineno}: {type}: {msg} at statement: {statement!r}"

_cache: OrderedDict[tuple[str, CompileOptions], Compiled] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 512
_serial = itertools.count(1)


def compile_program(source: str, opts: CompileOptions) -> Compiled:
    """Compile ``source`` under ``opts`` (cached)."""
    key = (source, opts)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    compiled = _compile(source, opts)
    with _cache_lock:
        _cache[key] = compiled
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def _compile(source: str, opts: CompileOptions) -> Compiled:
    with quiet_compile():  # SyntaxWarnings about the model's code are not the host's
        return _compile_quietly(source, opts)


def _compile_quietly(source: str, opts: CompileOptions) -> Compiled:
    filename = f"<rlm-repl-{next(_serial)}>"
    try:
        tree = ast.parse(source, filename, "exec")
    except (SyntaxError, ValueError) as exc:
        return Compiled(None, None, (_syntax_issue(exc),), filename)
    transformer = SandboxTransformer(opts)
    transformer.visit(tree)
    if transformer.issues:
        return Compiled(None, None, tuple(transformer.issues), filename)
    tree = _finish_tree(tree, opts, source)
    try:
        code = compile(tree, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:  # e.g. 'break' outside loop
        return Compiled(None, None, (_late_syntax_issue(exc),), filename)
    trailing = _trailing_code(source, opts, filename) if opts.trailing_line_heuristic else None
    return Compiled(code, trailing, (), filename)


def _syntax_issue(exc: SyntaxError | ValueError) -> CompileIssue:
    if isinstance(exc, SyntaxError):
        text = _SYNTAX_TEMPLATE.format(
            lineno=exc.lineno,
            type=type(exc).__name__,
            msg=exc.msg,
            statement=exc.text.strip() if exc.text else None,
        )
        return CompileIssue("syntax", exc.lineno, f"{type(exc).__name__}: {exc.msg}", text)
    # RestrictedPython 9 formats a ValueError (null byte) like a syntax error; 8.x gives its text.
    upstream = f"Line None: ValueError: {exc}" if _rp9() else str(exc)
    return CompileIssue("syntax", None, f"ValueError: {exc}", upstream)


def _late_syntax_issue(exc: SyntaxError | ValueError) -> CompileIssue:
    """A SyntaxError only CPython's compiler finds, after RestrictedPython accepted the tree.

    2fb46cc does not wrap these in "Compilation error": the exception's own text is used, with
    RestrictedPython's default filename.
    """
    issue = _syntax_issue(exc)
    upstream = str(exc)
    if isinstance(exc, SyntaxError):
        upstream = f"{exc.msg} (<string>, line {exc.lineno})"
    return dataclasses.replace(issue, kind="late-syntax", upstream_text=upstream)


def _trailing_code(source: str, opts: CompileOptions, filename: str) -> CodeType | None:
    """2fb46cc's second evaluation of the last line, compiled restricted (never a plain eval).

    Its rule, reproduced: the last line of the stripped code, when none of ``= import def class
    if for while with`` occurs in it as a substring, is evaluated again as an expression and
    shown; anything failing is silently skipped.
    """
    last = source.strip().split("\n")[-1].strip()
    if not last or any(k in last for k in _TRAILING_KEYWORDS):
        return None
    try:
        tree = ast.parse(last, filename, "eval")
    except (SyntaxError, ValueError):
        return None
    if any(isinstance(n, ast.Name) and n.id in ("print", "printed") for n in ast.walk(tree)):
        return None  # a plain eval could not resolve these names either
    transformer = SandboxTransformer(opts)
    transformer.visit(tree)
    if transformer.issues:
        return None
    tree = _RenameGuards().visit(_SizeGuards().visit(tree))
    try:
        return compile(ast.fix_missing_locations(tree), filename, "eval", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


def user_line(tb: Any, filename: str, lines: tuple[tuple[int, int], ...], blocks: int) -> str:
    """Where in the user's code a traceback last passed through this program ('' if nowhere)."""
    return describe_line(traceback_line(tb, filename), lines, blocks)
