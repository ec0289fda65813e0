"""Hypothesis properties of ``REPLExecutor``.

1. Differential: random straight-line programs from a small grammar (assignments with tuple /
   starred / nested unpacking, augmented assignment, int / str / list / dict / set arithmetic,
   indexing and slicing with item and slice assignment, comprehensions and generator expressions
   that read top-level names, functions (plain, recursive, lambdas, ``global``, printing) defined in
   one step and called in later ones, prints with ``sep`` / ``end``, dict updates, string methods,
   walrus, a displayed last expression) split into one to three steps, sometimes wrapped in code
   fences, give in profile ``fixed`` exactly the variables and the text that plain CPython ``exec``
   in one fresh dict gives.
2. Any text at all: ``execute`` returns a str or raises a ``REPLError``, nothing else.
3. Output is never longer than ``max_output_chars`` plus upstream's truncation marker, and in profile
   ``fixed`` equals the reference text with upstream's strip / marker rules.
4. A failing step leaves the variables of earlier steps intact, and the env stays usable.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import re
import types
from dataclasses import dataclass, field
from typing import Any

import pytest
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlm_compat.errors import REPLError
from rlm_compat.repl import REPLExecutor

PROFILES = ("fixed", "upstream")
INJECTED = frozenset({"re", "json", "math", "datetime", "timedelta", "Counter", "defaultdict"})
BIG = 10**6
_MARKER = re.compile(r"\n\n\[Output truncated: (\d+) chars total, showing first (\d+)\]\Z")

_BASE = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _examples(n: int) -> settings:
    """Moderate example counts: the whole file stays well under a minute on 2 cores."""
    return settings(_BASE, max_examples=examples(n))


# ------------------------------------------------------------------------------ the grammar


@dataclass
class _Scope:
    """Names defined so far, by kind; kinds never change, so every expression stays well typed."""

    names: dict[str, list[str]] = field(
        default_factory=lambda: {
            "int": [],
            "str": [],
            "list": [],
            "dict": [],
            "set": [],
            "fn": [],
            "proc": [],
            "bump": [],
        }
    )
    counter: int = 0

    def fresh(self, kind: str) -> str:
        self.counter += 1
        prefix = {
            "int": "n",
            "str": "s",
            "list": "xs",
            "dict": "d",
            "set": "st",
            "fn": "f",
            "proc": "p",
            "bump": "bump",
        }[kind]
        return f"{prefix}{self.counter}"

    def add(self, kind: str, name: str) -> None:
        if name not in self.names[kind]:
            self.names[kind].append(name)


_WORDS = st.text(alphabet="ab cxyz", max_size=6)


@st.composite
def _int_expr(draw: st.DrawFn, sc: _Scope) -> str:
    x, y = (draw(st.sampled_from(sc.names["int"])) for _ in range(2))
    s = draw(st.sampled_from(sc.names["str"]))
    xs = draw(st.sampled_from(sc.names["list"]))
    d = draw(st.sampled_from(sc.names["dict"]))
    options = [
        str(draw(st.integers(-20, 20))),
        x,
        f"{x} + {y}",
        f"{x} - {y}",
        f"({x} * {y}) % 1000",
        f"len({s})",
        f"len({xs})",
        f"sum({xs})",
        f"max({x}, {y})",
        f"abs({x})",
        f"{x} // 3",
        f"{x} % 7",
        f"{xs}[{y} % len({xs})]",
        f"{d}.get('k', 0)",
        f"len({d})",
        f"({x} if {x} > {y} else {y})",
        f"{s}.count('a')",
        f"{s}.find('b')",
        f"sum(v + {x} for v in {xs})",
        f"len([c for c in {s} if c != {s}[:1]])",
    ]
    if sc.names["fn"]:
        fn = draw(st.sampled_from(sc.names["fn"]))
        options.append(f"{fn}({x} % 10)")
    return draw(st.sampled_from(options))


@st.composite
def _str_expr(draw: st.DrawFn, sc: _Scope) -> str:
    s, t = (draw(st.sampled_from(sc.names["str"])) for _ in range(2))
    x = draw(st.sampled_from(sc.names["int"]))
    xs = draw(st.sampled_from(sc.names["list"]))
    options = [
        repr(draw(_WORDS)),
        s,
        f"({s} + {t})[:40]",
        f"{s}.upper()",
        f"{s}.lower()",
        f"{s}.replace('a', 'b')",
        f"{s}[:3]",
        f"{s}[1:]",
        f"{s}[::-1]",
        f"str({x})",
        f"'-'.join({s}.split())",
        f"f'{{{x}}}-{{{s}!r}}'",
        f"'{{}} {{}}'.format({x}, {s})",
        f"'{{n}}/{{w}}'.format(n={x}, w={t})",
        f"{s}.strip()",
        f"({s}[:4]) * 2",
        f"{s}.title()",
        f"{s}.center(7, '*')",
        f"'%s:%d' % ({s}, {x})",
        f"str({xs}[-3:])",
        f"''.join(c for c in {s} if c not in {t})",
    ]
    return draw(st.sampled_from(options))


@st.composite
def _list_expr(draw: st.DrawFn, sc: _Scope) -> str:
    x = draw(st.sampled_from(sc.names["int"]))
    xs = draw(st.sampled_from(sc.names["list"]))
    s = draw(st.sampled_from(sc.names["str"]))
    st_ = draw(st.sampled_from(sc.names["set"]))
    literal = repr(draw(st.lists(st.integers(-9, 9), min_size=1, max_size=4)))
    options = [
        literal,
        f"({xs} + [{x}])[-10:]",
        f"sorted({xs})",
        f"{xs}[::-1]",
        f"[v * 2 for v in {xs}]",
        f"[v + {x} for v in {xs}]",
        f"[v for v in {xs} if v > {x}] + [{x}]",
        f"list(range({draw(st.integers(1, 5))}))",
        f"[{xs}[i] for i in range(len({xs}))]",
        f"[len(w) for w in {s}.split()] + [0]",
        f"sorted({st_}) + [0]",
        f"[a * b for a, b in zip({xs}, {xs}[1:] + [{x}])]",
        f"({xs}[:3]) * 2",
        f"[{x}] * 2 + {xs}[-2:]",
    ]
    if sc.names["fn"]:
        fn = draw(st.sampled_from(sc.names["fn"]))
        options.append(f"[{fn}(v % 10) for v in {xs}]")
    return draw(st.sampled_from(options))


@st.composite
def _dict_expr(draw: st.DrawFn, sc: _Scope) -> str:
    x, y = (draw(st.sampled_from(sc.names["int"])) for _ in range(2))
    xs = draw(st.sampled_from(sc.names["list"]))
    d = draw(st.sampled_from(sc.names["dict"]))
    options = [
        f"{{'k': {x}, 'j': {y}}}",
        f"{{str(v): v + {x} for v in {xs}}}",
        f"dict(zip(['a', 'b'], {xs}))",
        f"{{**{d}, 'z': {x}}}",
        f"{{k: v for k, v in {d}.items() if v != {x}}}",
    ]
    return draw(st.sampled_from(options))


@st.composite
def _set_expr(draw: st.DrawFn, sc: _Scope) -> str:
    x, y = (draw(st.sampled_from(sc.names["int"])) for _ in range(2))
    xs = draw(st.sampled_from(sc.names["list"]))
    st_ = draw(st.sampled_from(sc.names["set"]))
    options = [
        f"{{v % 5 for v in {xs}}}",
        f"set({xs})",
        f"{st_} | {{v for v in {xs}}}",
        f"{{(v + {x}) % 7 for v in {xs} if v != {y}}}",
        f"{st_} & set({xs})",
        f"{{{x}, {y}}}",
    ]
    return draw(st.sampled_from(options))


_EXPRS = {"int": _int_expr, "str": _str_expr, "list": _list_expr, "dict": _dict_expr, "set": _set_expr}


def _target(draw: st.DrawFn, sc: _Scope, kind: str) -> str:
    """An existing name of ``kind`` or a new one (draw right-hand sides *before* targets)."""
    if len(sc.names[kind]) > 0 and draw(st.booleans()):
        return draw(st.sampled_from(sc.names[kind]))
    name = sc.fresh(kind)
    sc.add(kind, name)
    return name


@st.composite
def _statement(draw: st.DrawFn, sc: _Scope) -> str:
    def pick(kind: str) -> str:
        return draw(st.sampled_from(sc.names[kind]))

    rule = draw(
        st.sampled_from(
            [
                "assign",
                "assign",
                "assign",
                "swap",
                "starred",
                "nested",
                "aug",
                "item",
                "slice",
                "del_slice",
                "dict_update",
                "dict_item",
                "append",
                "sort",
                "set_add",
                "def_fn",
                "def_rec",
                "lambda",
                "def_proc",
                "def_bump",
                "call",
                "call",
                "print",
                "print_sep",
                "print_f",
                "for",
                "walrus",
                "stdlib",
                "stdlib",
                "class_dunder",
                "class_protocols",
                "dataclass",
                "match",
                "introspect",
            ]
        )
    )
    if rule == "assign":
        kind = draw(st.sampled_from(list(_EXPRS)))
        value = draw(_EXPRS[kind](sc))
        return f"{_target(draw, sc, kind)} = {value}"
    if rule == "swap":
        return f"{pick('int')}, {pick('str')} = {pick('int')}, {pick('str')}"
    if rule == "starred":
        source = pick("list")
        head, rest = _target(draw, sc, "int"), _target(draw, sc, "list")
        return f"{head}, *{rest} = {source} + [1, 2]"
    if rule == "nested":
        rhs = f"({draw(_int_expr(sc))}, {pick('int')}), {draw(_str_expr(sc))}"
        a, b, c = _target(draw, sc, "int"), _target(draw, sc, "int"), _target(draw, sc, "str")
        return f"({a}, {b}), {c} = {rhs}"
    if rule == "aug":
        return draw(
            st.sampled_from(
                [
                    f"{pick('int')} += {draw(_int_expr(sc))}",
                    f"{pick('int')} -= 1",
                    f"{pick('int')} *= 2",
                    f"{pick('str')} += {pick('str')}[:2]",
                    f"{pick('list')} += [{pick('int')}]",
                    f"{pick('dict')}['k'] = {pick('dict')}.get('k', 0) + 1",
                    f"{(xs := pick('list'))}[{pick('int')} % len({xs})] += {pick('int')}",
                    f"{(d := pick('dict'))}.setdefault('c', 0)\n{d}['c'] += 1",
                ]
            )
        )
    if rule == "item":
        xs = pick("list")
        return f"{xs}[{pick('int')} % len({xs})] = {draw(_int_expr(sc))}"
    if rule == "slice":
        return f"{pick('list')}[1:3] = [{pick('int')}, {pick('int')}]"
    if rule == "del_slice":
        return f"del {pick('list')}[1:]"
    if rule == "dict_update":
        return f"{pick('dict')}.update({{'u': {pick('int')}, 'w': {pick('str')}[:1]}})"
    if rule == "dict_item":
        return f"{pick('dict')}[{pick('str')}[:2]] = {draw(_int_expr(sc))}"
    if rule == "append":
        return f"{pick('list')}.append({draw(_int_expr(sc))})"
    if rule == "sort":
        return f"{pick('list')}.{draw(st.sampled_from(['sort()', 'reverse()']))}"
    if rule == "set_add":
        return f"{pick('set')}.add({pick('int')})"
    if rule == "def_fn":
        name = _target(draw, sc, "fn")
        return f"def {name}(v):\n    return v * 2 + {pick('int')}"
    if rule == "def_rec":
        name = sc.fresh("fn")
        stmt = f"def {name}(v):\n    return 0 if v <= 0 else v + {name}(v - 1)"
        sc.add("fn", name)
        return stmt
    if rule == "lambda":
        name = _target(draw, sc, "fn")
        return f"{name} = lambda v: v + {pick('int')} + len({pick('str')})"
    if rule == "def_proc":
        name = _target(draw, sc, "proc")
        call = f"\n{name}({pick('int')})" if draw(st.booleans()) else ""
        return f"def {name}(v):\n    print('proc', v, {pick('str')}, sep='|'){call}"
    if rule == "def_bump":
        name, counter = _target(draw, sc, "bump"), pick("int")
        return f"def {name}():\n    global {counter}\n    {counter} = {counter} + 1\n    return {counter}"
    if rule == "call":
        options = [f"{pick('int')} = {fn}({pick('int')} % 10)" for fn in sc.names["fn"]]
        options += [f"{p}({pick('int')})" for p in sc.names["proc"]] * 3
        options += [f"{pick('int')} = {b}()" for b in sc.names["bump"]]
        return draw(st.sampled_from(options)) if options else f"print({pick('int')})"
    if rule == "print":
        return f"print({draw(_EXPRS[draw(st.sampled_from(list(_EXPRS)))](sc))})"
    if rule == "print_sep":
        sep, end = draw(st.sampled_from([", ", "", "|"])), draw(st.sampled_from(["\n", "!\n", " "]))
        return f"print({pick('int')}, {pick('str')}, *{pick('list')}, sep={sep!r}, end={end!r})"
    if rule == "print_f":
        return f"print(f'{{{pick('str')}!r:>8}}|{{{pick('int')}:+d}}|{{len({pick('list')})}}')"
    if rule == "for":
        return f"for v in {pick('list')}:\n    {pick('int')} += v"
    if rule in ("stdlib", "class_dunder", "class_protocols", "dataclass", "match", "introspect"):
        return _issue11_statement(draw, sc, rule, pick)
    value = draw(_int_expr(sc))
    name, other = _target(draw, sc, "int"), sc.fresh("int")
    stmt = f"{name} = ({other} := {value}) + 1"
    sc.add("int", other)
    return stmt


def _issue11_statement(draw: st.DrawFn, sc: _Scope, rule: str, pick: Any) -> str:
    """Issue 11: the standard library, special methods, dataclasses and match, as models write them.

    Names are imported with ``from m import f`` (the same object in both namespaces) and classes
    are deleted at the end of the statement (a class is a different object in each namespace).
    """
    i, s, xs = pick("int"), pick("str"), pick("list")
    if rule == "stdlib":
        options: list[tuple[str, str]] = [
            ("int", "from hashlib import sha256\n{T} = int(sha256(<S>.encode()).hexdigest()[:4], 16)"),
            ("str", "from decimal import Decimal\n{T} = str(Decimal(<I>) / 4 + Decimal('0.1'))"),
            ("str", "from fractions import Fraction\n{T} = str(Fraction(<I>, 3) + Fraction(1, 6))"),
            ("str", "from unicodedata import category\n{T} = '-'.join(category(c) for c in <S>[:3])"),
            (
                "int",
                "from difflib import SequenceMatcher\n{T} = int(100 * SequenceMatcher(None, <S>, <S> + 'ab').ratio())",
            ),
            ("str", "from base64 import b64encode\n{T} = b64encode(<S>.encode()).decode()"),
            ("str", "from html import escape\n{T} = escape(<S> + '<&>')"),
            ("str", "from urllib.parse import quote\n{T} = quote(<S> + '/ ?')"),
            ("list", "from copy import deepcopy\n{T} = deepcopy(<XS>) + [<I>]"),
            ("int", "from operator import itemgetter\n{T} = itemgetter(0)(<XS> or [<I>])"),
            (
                "list",
                "from csv import reader\nfrom io import StringIO\n{T} = [len(r) for r in reader(StringIO(<S>.replace(' ', ',') + '\\n'))]",
            ),
            ("str", "from datetime import date\n{T} = date(2024, 1 + <I> % 12, 15).strftime('%A %b')"),
            (
                "int",
                "from datetime import datetime\n{T} = datetime.strptime('2024-03-' + str(1 + <I> % 28), '%Y-%m-%d').day",
            ),
            ("str", "from pprint import pformat\n{T} = pformat(<XS>, width=12)"),
            ("str", "from datetime import date\n{T} = f'{date(2024, 1 + <I> % 12, 1):%Y-%m %a}'"),
            ("int", "from datetime import date\n{T} = date(2024, 2, 1 + <I> % 28).timetuple().tm_yday"),
            (
                "str",
                "from decimal import Decimal, localcontext\nwith localcontext() as ctx:\n"
                "    ctx.prec = 4\n    {T} = str(Decimal(<I>) / 7)\ndel ctx",
            ),
            (
                "str",
                "from decimal import Decimal, ROUND_HALF_UP\n{T} = str(Decimal(<I>).scaleb(-2).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP))",
            ),
            ("str", "from hashlib import md5\n{T} = md5(<S>.encode()).hexdigest()[:8]"),
            (
                "list",
                "from operator import attrgetter, methodcaller\n{T} = [len(methodcaller('upper')(<S>)), attrgetter('real')(<I>)]\ndel attrgetter, methodcaller",
            ),
            (
                "list",
                "from collections import namedtuple\nP = namedtuple('P', 'x y')\n{T} = list(P(<I>, 2)._replace(y=3))\ndel P, namedtuple",
            ),
            (
                "str",
                "from csv import writer\nfrom io import StringIO\nbuf = StringIO()\nwriter(buf).writerow(<XS> + [<S>])\n{T} = buf.getvalue()\ndel buf",
            ),
            ("str", "from textwrap import shorten\n{T} = shorten(<S> * 3 + ' end', width=12)"),
            ("int", "from statistics import median\n{T} = int(median(<XS> + [<I>]))"),
            ("str", "from string import Template\n{T} = Template('$a-$b').substitute(a=<S>, b=<I>)"),
            (
                "list",
                "from typing import List, Optional\ndef f(v: Optional[int] = None) -> List[int]:\n    return [v or 0]\n{T} = f(<I>)\ndel f",
            ),
            ("str", "from json import dumps\n{T} = dumps({'k': <XS>, 'a': <S>}, sort_keys=True)"),
        ]
        kind, template = draw(st.sampled_from(options))
        code = template.replace("<XS>", xs).replace("<S>", s).replace("<I>", i)
        return code.replace("{T}", _target(draw, sc, kind))
    name = f"K{sc.fresh('int')}"
    if rule == "class_dunder":
        n = pick("int")
        return (
            f"class {name}:\n"
            f"    def __init__(self, v):\n        self._v = v\n"
            f"    def __repr__(self):\n        return f'{name}({{self._v}})'\n"
            f"    def __eq__(self, o):\n        return isinstance(o, {name}) and o._v == self._v\n"
            f"    def __hash__(self):\n        return hash(self._v)\n"
            f"    def __len__(self):\n        return abs(self._v) % 5\n"
            f"    def __iter__(self):\n        return iter(range(len(self)))\n"
            f"    def __lt__(self, o):\n        return self._v < o._v\n"
            f"{n} = len({name}({i})) + len({{{name}(1), {name}(1)}}) + sum({name}({i}))\n"
            f"print(sorted([{name}(2), {name}({i})]), type({name}(0)).__name__, hasattr({name}(0), '__len__'))\n"
            f"del {name}"
        )
    if rule == "class_protocols":
        n = pick("int")
        return (
            f"class {name}Base:\n    kinds = []\n"
            f"    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n"
            f"        {name}Base.kinds.append(cls.__name__)\n"
            f"class {name}({name}Base):\n    'A box.'\n"
            f"    def __init__(self, items):\n        self.items = list(items)\n        self.log = []\n"
            f"    def __str__(self):\n        return '<' + ','.join(map(str, self.items)) + '>'\n"
            f"    def __getitem__(self, k):\n        return self.items[k]\n"
            f"    def __contains__(self, v):\n        return v in self.items\n"
            f"    def __call__(self, v):\n        return v * 2\n"
            f"    def __enter__(self):\n        self.log.append('in')\n        return self\n"
            f"    def __exit__(self, *exc):\n        self.log.append('out')\n        return False\n"
            f"with {name}({xs}) as box:\n    {n} = box({i}) + len(box.items)\n"
            f"print(str(box), box[:1], {i} in box, box.log, {name}.__qualname__, {name}.__doc__, "
            f"{name}Base.kinds, hasattr(box, '__getitem__'))\n"
            f"del {name}, {name}Base, box"
        )
    if rule == "dataclass":
        return (
            f"from dataclasses import dataclass, asdict\n@dataclass(order=True)\nclass {name}:\n"
            f"    a: int\n    b: str = 'x'\n"
            f"print({name}({i}), asdict({name}({i}, {s})), {name}(1) < {name}(2))\ndel {name}"
        )
    if rule == "match":
        n = pick("int")
        return (
            f"match [{i}, {s}]:\n    case [0, _]:\n        {n} = 0\n"
            f"    case [int(v), str(w)] if v > 0:\n        {n} = v + len(w)\n"
            f"    case _:\n        {n} = -1"
        )
    return f"print(type({xs}).__name__, hasattr({s}, '__iter__'), {i}.__class__.__name__, len.__name__)"


_TRAILERS = ("int", "str", "list", "dict", "call_none", "none")


@st.composite
def _trailer(draw: st.DrawFn, sc: _Scope) -> str:
    kind = draw(st.sampled_from(_TRAILERS))
    if kind == "call_none":
        return f"{draw(st.sampled_from(sc.names['list']))}.append(7)"
    if kind == "none":
        return "None"
    return draw(_EXPRS[kind](sc))


@st.composite
def programs(draw: st.DrawFn) -> list[str]:
    """Steps of one random program (each a code string, maybe fenced)."""
    sc = _Scope()
    stmts: list[str] = []
    for kind in ("int", "int", "str", "str", "list", "dict", "set"):
        name = sc.fresh(kind)
        sc.add(kind, name)
        if kind == "int":
            stmts.append(f"{name} = {draw(st.integers(-50, 50))}")
        elif kind == "str":
            stmts.append(f"{name} = {draw(_WORDS)!r}")
        elif kind == "list":
            stmts.append(f"{name} = {draw(st.lists(st.integers(-9, 9), min_size=1, max_size=5))!r}")
        elif kind == "dict":
            stmts.append(f"{name} = {{'k': {draw(st.integers(0, 9))}}}")
        else:
            stmts.append(f"{name} = {{1, 2}}")
    steps: list[list[str]] = []
    for number in range(draw(st.integers(1, 3))):
        step = stmts if number == 0 else []
        for _ in range(draw(st.integers(1 if number else 0, 6))):
            step.append(draw(_statement(sc)))
        if draw(st.booleans()):
            step.append(draw(_trailer(sc)))  # drawn now: it may only use names defined so far
        steps.append(step)
    return [_fence(draw, step) for step in steps]


def _fence(draw: st.DrawFn, step: list[str]) -> str:
    style = draw(st.sampled_from(["bare", "bare", "one", "two"]))
    tag = draw(st.sampled_from(["python", "py", "python3", "repl", ""]))
    if style == "bare" or (style == "two" and len(step) < 2):
        return "\n".join(step)
    if style == "one":
        return f"Let me compute this.\n```{tag}\n" + "\n".join(step) + "\n```\nThat should do."
    cut = draw(st.integers(1, len(step) - 1))
    first, second = "\n".join(step[:cut]), "\n".join(step[cut:])
    return f"First:\n```{tag}\n{first}\n```\nthen\n```\n{second}\n```\n"


# ------------------------------------------------------------------------------ the reference


_FENCED = re.compile(r"```[^\n`]*\n(.*?)\n```", re.DOTALL)


def _unfence(text: str) -> str:
    blocks = _FENCED.findall(text)
    return "\n".join(blocks) if blocks else text


def reference_step(code: str, ns: dict[str, Any]) -> str:
    """What plain CPython prints for one step, plus ``str()`` of a final expression statement."""
    tree = ast.parse(code)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(body, "<reference>", "exec"), ns)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<reference>", "eval"), ns)
            if value is not None:
                print(str(value))
    return buf.getvalue()


def shown(text: str, max_chars: int) -> str:
    """Upstream's rendering of collected output: fixed strings, marker, strip."""
    if not text:
        return "Code executed successfully (no output)"
    if len(text) > max_chars:
        return f"{text[:max_chars]}\n\n[Output truncated: {len(text)} chars total, showing first {max_chars}]"
    return text.strip()


def _user_vars(ns: dict[str, Any], provided: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {k: v for k, v in ns.items() if not k.startswith("__") and k not in INJECTED and k not in provided}


def _comparable(value: Any) -> Any:
    if isinstance(value, types.FunctionType):
        return ("function", value.__name__)
    return (type(value).__name__, value)


# ------------------------------------------------------------------------------ properties


@pytest.fixture(scope="module")
def fixed() -> REPLExecutor:
    # inline: the variables themselves are compared, functions included
    return REPLExecutor(timeout=5, max_output_chars=BIG, profile="fixed", isolation="inline")


@_examples(300)
@given(steps=programs())
def test_fixed_matches_plain_exec(fixed: REPLExecutor, steps: list[str]) -> None:
    """Same variables and the same text as plain ``exec`` in one fresh dict, step by step."""
    env: dict[str, Any] = {}
    ref: dict[str, Any] = {}
    for number, step in enumerate(steps, 1):
        code = _unfence(step)
        expected = shown(reference_step(code, ref), BIG)  # a failure here is a grammar bug
        try:
            got = fixed.execute(step, env)
        except REPLError as exc:
            pytest.fail(f"step {number} refused by profile fixed but fine in CPython:\n{step}\n-> {exc}")
        assert got == expected, f"step {number}:\n{step}"
        mine = {k: _comparable(v) for k, v in _user_vars(env).items()}
        theirs = {k: _comparable(v) for k, v in _user_vars(ref).items()}
        assert mine == theirs, f"variables differ after step {number}:\n{step}"


_TOKENS = (
    "```python\n",
    "```\n",
    "```repl\n",
    "```py\n",
    "\n",
    "    ",
    "\t",
    "def ",
    "f(",
    "x",
    "y",
    "print(",
    ")",
    "(",
    ":",
    " = ",
    "=",
    "+=",
    "1",
    "0",
    "'",
    '"',
    "\\",
    "{",
    "}",
    "[",
    "]",
    "**",
    "__",
    "_",
    "import ",
    "from ",
    "re",
    "os",
    "lambda",
    "yield",
    "await ",
    "async ",
    "class ",
    "return ",
    "global ",
    "nonlocal ",
    "try:",
    "except",
    "finally:",
    "raise ",
    "SystemExit",
    "KeyboardInterrupt",
    "GeneratorExit",
    "exit()",
    "FINAL(",
    "FINAL_VAR(",
    "#",
    "@",
    "del ",
    "for ",
    " in ",
    "if ",
    "else",
    ",",
    ".",
    "...",
    "getattr",
    "__class__",
    "format",
    "context",
    "\x00",
    "\r",
    "\ufeff",
    "é",
    "match ",
    "case ",
    "*",
    ";",
    "->",
    "%",
    "f'{",
    "}'",
    "`",
    "with ",
    "as ",
    "assert ",
    "not ",
    "is ",
    "None",
    "True",
    ":=",
    "|",
)

arbitrary_text = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=4)), max_size=30).map("".join),
)


@pytest.mark.parametrize("profile", PROFILES)
@_examples(200)
@given(text=arbitrary_text)
def test_any_text_gives_str_or_repl_error(profile: str, text: str) -> None:
    executor = REPLExecutor(timeout=1, max_output_chars=500, profile=profile)
    env: dict[str, Any] = {"context": "some context", "query": "q"}
    try:
        result = executor.execute(text, env)
    except REPLError as exc:
        assert str(exc).strip(), "a REPLError without a message"
        return
    except BaseException as exc:  # the property: nothing but REPLError ever leaves execute()
        pytest.fail(f"{type(exc).__name__} escaped execute() for {text!r}: {exc}")
    assert isinstance(result, str)


_PRINTABLE = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@st.composite
def _print_programs(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        text = draw(_PRINTABLE)
        shape = draw(st.sampled_from(["plain", "repeat", "end", "loop"]))
        if shape == "plain":
            lines.append(f"print({text!r})")
        elif shape == "repeat":
            lines.append(f"print({text!r} * {draw(st.integers(0, 60))})")
        elif shape == "end":
            end = draw(st.sampled_from(["", " ", "\n\n"]))
            lines.append(f"print({text!r}, end={end!r})")
        else:
            lines.append(f"for i in range({draw(st.integers(0, 30))}):\n    print(i, {text!r})")
    if draw(st.booleans()):
        lines.append(f"{draw(_PRINTABLE)!r} * {draw(st.integers(0, 20))}")
    lines.append("done = 1")
    return "\n".join(lines)


@pytest.mark.parametrize("profile", PROFILES)
@_examples(150)
@given(code=_print_programs(), limit=st.integers(0, 300))
def test_output_is_capped(profile: str, code: str, limit: int) -> None:
    executor = REPLExecutor(timeout=5, max_output_chars=limit, profile=profile)
    result = executor.execute(code, {})
    marker = _MARKER.search(result)
    if marker:
        total, shown_n = int(marker.group(1)), int(marker.group(2))
        assert shown_n == limit and total > limit
        assert marker.start() == limit, "the kept head is not exactly max_output_chars long"
    else:
        assert len(result) <= max(limit, len("Code executed successfully (no output)"))
    if profile == "fixed":
        assert result == shown(reference_step(code, {}), limit)


_FAILURES = (
    "1 / 0",
    "undefined_name_xyz + 1",
    "[][1]",
    "{}['missing']",
    "raise ValueError('boom')",
    "def (:",
    "import os",
    "getattr(1, '__subcl' + 'asses__')",
    "x = (1).__globals__",
    "big = 10 ** 10 ** 10",
    "int('x')",
    "assert False, 'no'",
    "'a' + 1",
    "open('f.txt')",
    "n_new = 5\n1 / 0",
    "q_new = [1]\nq_new[5]",
)


@st.composite
def _simple_state(draw: st.DrawFn) -> str:
    values = st.one_of(
        st.integers(-(10**6), 10**6),
        _WORDS,
        st.lists(st.integers(-9, 9), max_size=4),
        st.dictionaries(_WORDS, st.integers(0, 9), max_size=3),
    )
    names = draw(
        st.lists(
            st.sampled_from(["a", "b", "c", "s", "t", "xs", "d", "k"]), min_size=1, max_size=5, unique=True
        )
    )
    return "\n".join(f"{n} = {draw(values)!r}" for n in names)


@pytest.mark.parametrize("profile", PROFILES)
@_examples(80)
@given(setup=_simple_state(), failure=st.sampled_from(_FAILURES))
def test_failing_step_keeps_state(profile: str, setup: str, failure: str) -> None:
    executor = REPLExecutor(timeout=5, profile=profile)
    env: dict[str, Any] = {}
    executor.execute(setup, env)
    before = copy.deepcopy(_user_vars(env))
    with pytest.raises(REPLError):
        executor.execute(failure, env)
    after = _user_vars(env)
    assert {k: after.get(k) for k in before} == before
    name = next(iter(before))
    assert executor.execute(f"print(repr({name}))\nshown_ok = 1", env) == repr(before[name]).strip()


@_examples(60)
@given(steps=programs(), failure=st.sampled_from(_FAILURES))
def test_failing_step_keeps_grammar_state(fixed: REPLExecutor, steps: list[str], failure: str) -> None:
    """The same after a random grammar program (profile fixed, where the grammar runs)."""
    env: dict[str, Any] = {}
    for step in steps:
        fixed.execute(step, env)
    before = {k: _comparable(v) for k, v in _user_vars(env).items()}
    snapshot = copy.deepcopy({k: v for k, v in _user_vars(env).items() if not callable(v)})
    with pytest.raises(REPLError):
        fixed.execute(failure, env)
    assert {k: _comparable(v) for k, v in _user_vars(env).items() if k in before} == before
    assert {k: env[k] for k in snapshot} == snapshot
