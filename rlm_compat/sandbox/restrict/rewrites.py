"""The passes after the policy check: what the compiler adds once the transformer accepted a tree.

The display of the last expression, a deadline tick at the top of every ``except`` body (and
generator step), size guards on ``**`` / ``<<`` / risky ``*``, ``super()`` made explicit, the
guarded reads of ``match`` patterns and the native fast path for plain builtin receivers. They
run after :class:`~.transformer.SandboxTransformer` because they insert names it would refuse
(``_rlm_show_``, ``__class__``...). :func:`finish_tree` chooses the passes a source needs.
"""

from __future__ import annotations

import ast
import sys
from typing import Any, ClassVar

from RestrictedPython.transformer import copy_locations

from .transformer import CompileOptions

__all__ = ["RenameGuards", "SizeGuards", "finish_tree"]

_PY310 = sys.version_info < (3, 11)


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


class SizeGuards(ast.NodeTransformer):
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


class RenameGuards(ast.NodeTransformer):
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


def finish_tree(tree: ast.Module, opts: CompileOptions, source: str) -> ast.Module:
    """The passes ``tree`` (accepted by the transformer) needs, applied in their order."""
    # Each pass walks the whole tree; the source tells cheaply which ones can change anything.
    if opts.fast_plain_attributes and "." in source:
        tree = _FastPlain().visit(tree)
    if "super" in source:
        tree = _ZeroArgSuper().visit(tree)
    if "match" in source and not opts.rp_syntax_only:
        tree = _MatchValues().visit(tree)
    if "*" in source or "<<" in source or "pow" in source:
        tree = SizeGuards().visit(tree)
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
