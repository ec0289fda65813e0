"""Issue 11: what models write works in profile fixed as in CPython, in both isolations.

Each snippet's expected output is what CPython prints for it (checked by running the same code
with ``exec`` in this test, where that is deterministic), the standard library's own imports work
whatever the host imported before (checked in fresh interpreters), and the new modules' process
state (decimal contexts, ``time.sleep``) stays the session's.
"""

from __future__ import annotations

import contextlib
import decimal
import io
import subprocess
import sys
import textwrap

import pytest
from escape_corpus import BY_ID

from rlm_compat import REPLError, REPLExecutor
from rlm_compat.errors import REPLSecurityError, REPLTimeoutError

ISOLATIONS = ("inline", "process")

WHY_SNIPPETS = {
    "strftime": "import datetime\nprint(datetime.date(2024, 1, 15).strftime('%A'))",
    "timetuple": "import datetime\nprint(datetime.date(2024, 1, 15).timetuple().tm_yday)",
    "fstring_date": "import datetime\nd = datetime.date(2024, 1, 15)\nprint(f'{d:%Y}')",
    "strptime": "import datetime\nprint(datetime.datetime.strptime('2024-01-15', '%Y-%m-%d'))",
    "hasattr_len": "print(hasattr([1], '__len__'), hasattr(3, '__iter__'), hasattr('s', '__iter__'))",
    "type_name": "print(type(3).__name__, type([]).__qualname__)",
    "repr_class": "class A:\n    def __repr__(self):\n        return 'A!'\nprint(repr(A()), [A()])",
    "str_class": "class A:\n    def __str__(self):\n        return 'a-str'\nprint(A(), str(A()))",
    "match": "x = 3\nmatch x:\n    case 3:\n        print('three')\n    case _:\n        print('other')",
    "imports": "import csv, hashlib, decimal, fractions, operator, dataclasses, typing, unicodedata, difflib, time\n"
    "print('ok')",
    "dunder_class": textwrap.dedent(
        """
        class V:
            '''A vector.'''
            def __init__(self, x, y):
                self.x, self.y = x, y
            def __repr__(self):
                return f'V({self.x}, {self.y})'
            def __eq__(self, o):
                return isinstance(o, V) and (self.x, self.y) == (o.x, o.y)
            def __hash__(self):
                return hash((self.x, self.y))
            def __lt__(self, o):
                return (self.x, self.y) < (o.x, o.y)
            def __len__(self):
                return 2
            def __iter__(self):
                return iter((self.x, self.y))
            def __getitem__(self, i):
                return (self.x, self.y)[i]
            def __contains__(self, v):
                return v in (self.x, self.y)
            def __call__(self, k):
                return self.x * k
            def __add__(self, o):
                return V(self.x + o.x, self.y + o.y)
            __radd__ = __add__
        print(V(1, 2) == V(1, 2), len({V(1, 2), V(1, 2)}), sorted([V(2, 1), V(1, 2)]), len(V(1, 2)))
        print(list(V(3, 4)), V(3, 4)[1], 3 in V(3, 4), V(2, 0)(5), V(1, 1) + V(2, 2))
        print(type(V(1, 2)).__name__, V.__qualname__, V.__doc__, V(1, 2).__class__.__name__)
        """
    ),
    "context_manager": textwrap.dedent(
        """
        class Ctx:
            def __enter__(self):
                print('enter')
                return self
            def __exit__(self, kind, value, tb):
                print('exit', kind.__name__)
                return True
        with Ctx():
            raise ValueError('x')
        class Base:
            registry = []
            def __init_subclass__(cls, **kw):
                super().__init_subclass__(**kw)
                Base.registry.append(cls.__name__)
        class Child(Base):
            pass
        print(Base.registry)
        """
    ),
    "private_names": textwrap.dedent(
        """
        class Cache:
            def __init__(self):
                self._d = {}
                self.__hits = 0
            def get(self, k):
                self.__hits += 1
                return self._d.get(k), self.__hits
        c = Cache()
        c._d['a'] = 1
        print(c.get('a'), sorted(vars(c)))
        """
    ),
    "dataclass": "from dataclasses import dataclass, field, asdict\n@dataclass(order=True)\nclass P:\n"
    "    x: int\n    y: int = 0\n    tags: list = field(default_factory=list)\np = P(1)\n"
    "print(p, asdict(p), P(1) < P(2))",
    "frozen": "from dataclasses import dataclass\n@dataclass(frozen=True)\nclass P:\n    x: int\n"
    "try:\n    P(1).x = 2\nexcept Exception as e:\n    print(type(e).__name__)",
    "typing": "from typing import NamedTuple, List, Optional\nclass Pt(NamedTuple):\n    x: int\n    y: int = 0\n"
    "def f(a: List[int]) -> Optional[int]:\n    return a[0] if a else None\nprint(Pt(1), f([3]), Pt(1)._replace(y=5))",
    "csv": "import csv, io\nprint(list(csv.reader(io.StringIO('a,b\\n1,2\\n'))))\nbuf = io.StringIO()\n"
    "w = csv.DictWriter(buf, fieldnames=['a'])\nw.writeheader()\nw.writerow({'a': 1})\nprint(repr(buf.getvalue()))",
    "hashlib": "import hashlib\nprint(hashlib.sha256(b'abc').hexdigest(), hashlib.md5('x'.encode()).hexdigest())",
    "decimal_fractions": "from decimal import Decimal, localcontext\nfrom fractions import Fraction\n"
    "with localcontext() as c:\n    c.prec = 5\n    print(Decimal(1) / Decimal(7))\n"
    "print(Decimal('0.1') + Decimal('0.2'), Fraction(1, 3) + Fraction(1, 6))",
    "operator": "import operator\nrows = [(1, 'b'), (0, 'a')]\n"
    "print(sorted(rows, key=operator.itemgetter(1)), operator.attrgetter('real')(3), operator.mul(3, 4))",
    "misc_modules": "import unicodedata, difflib, base64, copy, html\nfrom urllib.parse import urlparse, quote\n"
    "print(unicodedata.name('a'), difflib.get_close_matches('appel', ['apple', 'ape']), base64.b64encode(b'hi'))\n"
    "print(copy.deepcopy([1, [2]]), html.escape('<a>'), urlparse('http://x.com/p?q=1').netloc, quote('a b'))",
    "namedtuple_api": "from collections import namedtuple\nfrom urllib.parse import urlparse\nP = namedtuple('P', 'x y')\n"
    "p = P(1, 2)\nprint(p._replace(y=3), p._asdict(), P._fields, P._make([5, 6]), P._field_defaults)\n"
    "print(urlparse('http://a/b')._replace(path='/c').geturl())",
    "pprint": "import pprint\npprint.pprint({'b': [1, 2], 'a': 1})\npprint.pp([1])",
    "urllib_dotted": "import urllib.parse\nprint(urllib.parse.urlencode({'a': 1}))",
    "match_patterns": "def g(x):\n    match x:\n        case {'type': 'pt', 'xy': [a, b]}:\n            return a + b\n"
    "        case int(n) if n > 3:\n            return 'big'\n        case str() | bytes():\n            return 'text'\n"
    "        case _:\n            return None\nprint(g({'type': 'pt', 'xy': [1, 2]}), g(5), g('s'), g(1.0))",
    "match_dotted": "import datetime\nmatch 1:\n    case datetime.MINYEAR:\n        print('min')\n    case _:\n        print('other')",
    "dunder_main": "if __name__ == '__main__':\n    print('main')",
    "exception_init": "class E(Exception):\n    def __init__(self, msg, code):\n        Exception.__init__(self, msg)\n"
    "        self.code = code\ntry:\n    raise E('bad', 3)\nexcept E as e:\n    print(e, e.code, type(e).__name__)",
}


def _cpython(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<cpython>", "exec"), {"__name__": "__main__"})
    return out.getvalue().strip()


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("name", sorted(WHY_SNIPPETS))
def test_what_models_write_works_as_in_cpython(isolation: str, name: str) -> None:
    code = WHY_SNIPPETS[name]
    with REPLExecutor(isolation=isolation, timeout=10) as ex:
        assert ex.execute(code, {}) == _cpython(code)


def test_open_points_at_context() -> None:
    for isolation in ISOLATIONS:
        with REPLExecutor(isolation=isolation) as ex, pytest.raises(REPLSecurityError, match="`context`"):
            ex.execute("open('x.txt')", {})


def test_async_is_a_clear_refusal() -> None:
    with pytest.raises(REPLSecurityError, match="no event loop"):
        REPLExecutor().execute("async def f():\n    return 1", {})


_FRESH = """
import sys
{before}
from rlm_compat import REPLExecutor
out = []
for isolation in ("inline", "process"):
    with REPLExecutor(isolation=isolation, timeout=10) as ex:
        out.append(ex.execute({code!r}, {{}}))
print(repr(out))
"""

_INTERNAL = {
    "strptime": ("import datetime\nprint(datetime.datetime.strptime('03/02/2024', '%d/%m/%Y').month)", "2"),
    "strftime": ("import datetime\nprint(datetime.date(2024, 1, 15).strftime('%a %B'))", "Mon January"),
    "time_strptime": ("import time\nprint(time.strptime('2024', '%Y').tm_year)", "2024"),
    "warning": ("import re\nre.compile('[[a]')\nprint('done')", "done"),
}


@pytest.mark.parametrize("before", ["", "import _strptime, time, linecache, warnings"], ids=["bare", "warm"])
@pytest.mark.parametrize("name", sorted(_INTERNAL))
def test_stdlib_internal_imports_do_not_depend_on_the_host(name: str, before: str) -> None:
    """In a fresh interpreter, with and without the host having imported the modules first."""
    code, expected = _INTERNAL[name]
    script = _FRESH.format(before=before, code=code)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == repr([expected, expected])


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_decimal_context_is_the_sessions(isolation: str) -> None:
    host = decimal.getcontext()
    prec = host.prec
    with REPLExecutor(isolation=isolation) as ex, REPLExecutor(isolation=isolation) as other:
        env: dict = {}
        ex.execute("from decimal import Decimal, getcontext\ngetcontext().prec = 3", env)
        assert ex.execute("Decimal(1) / Decimal(7)", env) == "0.143"
        assert other.execute("from decimal import Decimal\nDecimal(1) / Decimal(7)", {}).startswith(
            "0.142857142857"
        )
    assert decimal.getcontext() is host and host.prec == prec


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_sleep_respects_the_step_deadline(isolation: str) -> None:
    with REPLExecutor(isolation=isolation, timeout=0.5) as ex:
        env: dict = {"keep": 1}
        with pytest.raises(REPLTimeoutError):
            ex.execute("import time\ntime.sleep(3600)", env)
        assert ex.execute("keep + 1", env) == "2"


@pytest.mark.parametrize(
    "code",
    [
        "(1).__class__.__base__",
        "len.__self__",
        "object.__subclasses__()",
        "f = lambda: 0\nf.__code__",
        "def g():\n    yield 1\ng().gi_frame",
        "(1).__reduce_ex__(2)",
        "object.__getattribute__(len, '__self__')",
        "getattr(1, '__globals__')",
        "import math\nmath.__dict__",
        "__builtins__",
        "import decimal\ndecimal.getcontext().__class__.__init__(decimal.DefaultContext)",
    ],
)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_special_names_that_lead_out_stay_refused(isolation: str, code: str) -> None:
    with REPLExecutor(isolation=isolation) as ex, pytest.raises(REPLError):
        ex.execute(code, {})


@pytest.mark.parametrize(
    "case_id",
    [
        "dataclass_on_host_class",
        "make_dataclass_finalizer",
        "operator_attrgetter_globals",
        "operator_methodcaller_reduce",
        "decimal_default_context",
        "copy_module_proxy",
        "match_class_keyword_dunder",
        "match_value_eq_leak",
        "object_setattr_class_swap",
        "typing_get_type_hints",
        "class_body_guard_shadow",
    ],
)
def test_issue11_escapes_refused_in_process_isolation(case_id: str) -> None:
    """The escape corpus runs inline; its new cases are refused by the worker too."""
    case = BY_ID[case_id]
    env: dict = {"helper": len, "hosted": len, "re": __import__("re")}
    with REPLExecutor(isolation="process") as ex:
        with pytest.raises(REPLError):
            ex.execute(case.code, env)
        assert "ESCAPED" not in env
