"""Guards, builtins, imports and module proxies, in both profiles."""

from __future__ import annotations

import random
import re

import pytest

from rlm_compat.errors import REPLError, REPLSecurityError
from rlm_compat.profiles import Profile
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.modules import ALLOWED_MODULES


def outcome(code: str, profile: str = "fixed", env: dict | None = None) -> str:
    try:
        return REPLExecutor(profile=profile).execute(code, {} if env is None else env)
    except REPLError as exc:
        return str(exc)


# (code, fixed output, upstream output or error)
GUARD_CASES = [
    ("inplace_name", "x = 1\nx += 2\nprint(x)", "3", "Execution error: name '_inplacevar_' is not defined"),
    (
        "inplace_list_alias",
        "a = [1]\nb = a\nb += [2]\nprint(a)",
        "[1, 2]",
        "Execution error: name '_inplacevar_' is not defined",
    ),
    (
        "inplace_item",
        "d = {'k': 1}\nd['k'] += 1\nprint(d)",
        "{'k': 2}",
        "Execution error: Compilation error: Line 2: Augmented assignment of object items and "
        "slices is not allowed.",
    ),
    ("unpack", "a, b = 1, 2\nprint(a + b)", "3", "Execution error: name '_unpack_sequence_' is not defined"),
    (
        "star_unpack",
        "a, *b = [1, 2, 3]\nprint(b)",
        "[2, 3]",
        "Execution error: name '_unpack_sequence_' is not defined",
    ),
    (
        "nested_unpack",
        "(a, (b, c)), d = (1, (2, 3)), 4\nprint(a + b + c + d)",
        "10",
        "Execution error: name '_unpack_sequence_' is not defined",
    ),
    ("for_unpack", "for k, v in {'a': 1}.items():\n    print(k, v)", "a 1", "a 1"),
    (
        "item_write",
        "l = [1, 2]\nl[0] = 5\nprint(l)",
        "[5, 2]",
        "Execution error: name '_write_' is not defined",
    ),
    (
        "slice_write",
        "l = [1, 2, 3]\nl[0:2] = [9]\nprint(l)",
        "[9, 3]",
        "Execution error: name '_write_' is not defined",
    ),
    (
        "item_delete",
        "d = {'a': 1, 'b': 2}\ndel d['a']\nprint(d)",
        "{'b': 2}",
        "Execution error: name '_write_' is not defined",
    ),
    (
        "slice_delete",
        "l = [1, 2, 3]\ndel l[1:]\nprint(l)",
        "[1]",
        "Execution error: name '_write_' is not defined",
    ),
    (
        "counter_item",
        "c = Counter()\nc['w'] += 1\nprint(c['w'])",
        "1",
        "Execution error: Compilation error: Line 2: Augmented assignment of object items and "
        "slices is not allowed.",
    ),
    (
        "class_with_methods",
        "class Box:\n    def __init__(self, v):\n        self.v = v\n    def twice(self):\n"
        "        return self.v * 2\nb = Box(4)\nb.v += 1\nprint(b.twice())",
        "10",
        "Execution error: Compilation error: Line 7: Augmented assignment of attributes is not allowed.",
    ),
    (
        "class_dunders",
        "class Bag:\n    def __init__(self):\n        self.items = []\n    def __len__(self):\n"
        "        return len(self.items)\n    def __getitem__(self, i):\n        return self.items[i]\n"
        "b = Bag()\nb.items.append(3)\nprint(len(b), b[0])",
        "1 3",
        'Execution error: Compilation error: Line 4: "__len__" is an invalid variable name because '
        'it starts with "_", Line 6: "__getitem__" is an invalid variable name because it '
        'starts with "_"',
    ),
    (
        "subclass_exception",
        "class Oops(ValueError):\n    pass\ntry:\n    raise Oops('x')\n"
        "except ValueError as e:\n    print('caught', e)",
        "caught x",
        "Execution error: name '__metaclass__' is not defined",
    ),
    (
        "getattr_builtin",
        "print(getattr('a', 'upper')(), getattr(1, 'nope', 'dflt'))",
        "A dflt",
        "Execution error: name 'getattr' is not defined",
    ),
    ("hasattr_builtin", "print(hasattr('a', 'upper'), hasattr('a', 'nope'))", "True False", "True False"),
    (
        "setattr_user_object",
        "class A:\n    pass\na = A()\nsetattr(a, 'x', 3)\nprint(a.x)",
        "3",
        "Execution error: name '__metaclass__' is not defined",
    ),
    (
        "exceptions",
        "try:\n    int('z')\nexcept ValueError as e:\n    print(type(e) is ValueError)",
        "True",
        "True",
    ),
    ("fstring", "n = 3\nprint(f'{n:03d} {n!r} {\"x\"}')", "003 3 x", "003 3 x"),
    ("walrus", "if (n := len('abcd')) > 3:\n    print(n)", "4", "4"),
    (
        "format_positional",
        "print('{} and {}'.format(1, 'b'))",
        "1 and b",
        "Execution error: Using the format*() methods of `str` is not safe",
    ),
    (
        "format_named",
        "print('{name}!'.format(name='x'))",
        "x!",
        "Execution error: Using the format*() methods of `str` is not safe",
    ),
    (
        "format_spec",
        "print('{:.2f}|{:>4}'.format(3.14159, 'a'))",
        "3.14|   a",
        "Execution error: Using the format*() methods of `str` is not safe",
    ),
    (
        "format_item_walk",
        "print('{0[k]}'.format({'k': 5}))",
        "5",
        "Execution error: Using the format*() methods of `str` is not safe",
    ),
    (
        "format_map",
        "print('{a}-{b}'.format_map({'a': 1, 'b': 2}))",
        "1-2",
        "Execution error: Using the format*() methods of `str` is not safe",
    ),
    ("star_call", "print(*[1, 2], sep='+')", "1+2", "Execution error: name '_apply_' is not defined"),
    (
        "kwargs_call",
        "def f(**kw):\n    return sorted(kw)\nprint(f(**{'a': 1}))",
        "['a']",
        "Execution error: name '_apply_' is not defined",
    ),
    (
        "annotated_assign",
        "x: int = 3\nprint(x)",
        "3",
        "Execution error: Compilation error: Line 1: AnnAssign statements are not allowed.",
    ),
    (
        "nonlocal",
        "def f():\n    n = 1\n    def g():\n        nonlocal n\n        n = 2\n"
        "    g()\n    return n\nprint(f())",
        "2",
        "Execution error: Compilation error: Line 4: Nonlocal statements are not allowed.",
    ),
    (
        "injected_names",
        "print(json.dumps([math.floor(2.5)]), datetime(2020, 1, 2).year, "
        "timedelta(days=1).days, Counter('aab')['a'], defaultdict(int)['z'])",
        "[2] 2020 1 2 0",
        "[2] 2020 1 2 0",
    ),
    (
        "missing_attribute",
        "print('a'.nope)",
        "Execution error: AttributeError: 'str' object has no attribute 'nope' (line 1)",
        "None",
    ),
]


@pytest.mark.parametrize(("name", "code", "fixed", "upstream"), GUARD_CASES, ids=[c[0] for c in GUARD_CASES])
@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_guard(profile: str, name: str, code: str, fixed: str, upstream: str) -> None:
    assert outcome(code, profile) == (fixed if profile == "fixed" else upstream)


@pytest.mark.parametrize(
    "code",
    [
        "'{0.__class__.__base__}'.format(1)",
        "'{0.__class__.__mro__}'.format(1)",
        "'{x.__class__.__subclasses__}'.format_map({'x': 1})",
        "str.format('{0.__globals__}', len)",
        "import string\nstring.Formatter().format('{0.__class__.__bases__}', 1)",
        "'{0:{1.__class__.__dict__}}'.format(1, 2)",
        "'{0.__init__.__globals__}'.format(len)",
        "import string\nstring.Formatter.mro()",
    ],
)
def test_format_attribute_walks_are_refused(code: str) -> None:
    with pytest.raises(REPLSecurityError):
        REPLExecutor().execute(code, {})


def test_format_fields_read_what_python_shows() -> None:
    """Descriptive special names are fields like any other: ``{0.__class__.__name__}``."""
    assert REPLExecutor().execute("'{0.__class__.__name__}/{0.real}'.format(3)", {}) == "int/3"


# --- imports ------------------------------------------------------------------------------------


@pytest.mark.parametrize("module", ALLOWED_MODULES)
def test_allowlisted_imports_work(module: str) -> None:
    assert outcome(f"import {module}\nprint('ok')") == "ok"


def test_required_modules_are_allowlisted() -> None:
    required = {
        "re",
        "json",
        "math",
        "datetime",
        "collections",
        "itertools",
        "functools",
        "statistics",
        "string",
        "textwrap",
    }
    assert required <= set(ALLOWED_MODULES)


@pytest.mark.parametrize(
    "code",
    ["import os", "import sys", "from subprocess import run", "import collections.abc", "import importlib"],
)
def test_other_imports_name_the_allowlist(code: str) -> None:
    with pytest.raises(REPLSecurityError) as info:
        REPLExecutor().execute(code, {})
    text = str(info.value)
    assert text.startswith("Execution error: ImportError: ")
    assert "json" in text and "collections" in text  # the allowed names are listed


def test_from_import_of_a_hidden_member_names_what_is_available() -> None:
    with pytest.raises(REPLSecurityError) as info:
        REPLExecutor().execute("from json import decoder", {})
    assert "cannot import name 'decoder'" in str(info.value) and "loads" in str(info.value)


def test_from_import_and_aliases() -> None:
    code = (
        "from collections import Counter as C, deque\nimport itertools as it\n"
        "print(C('aa')['a'], list(it.islice(deque([1, 2, 3]), 2)))"
    )
    assert outcome(code) == "2 [1, 2]"


def test_imports_refused_in_upstream() -> None:
    assert outcome("import re", "upstream") == "Execution error: __import__ not found"


# --- module proxies -----------------------------------------------------------------------------


ESCAPES = [
    "re.enum",
    "re.copyreg",
    "re.functools",
    "json.codecs",
    "json.decoder",
    "json.scanner",
    "datetime.sys",
    "statistics.random",
    "statistics.sys",
    "textwrap.re",
    "functools.GenericAlias",
    "collections._sys",
    "string._re",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_module_walks_are_refused(path: str) -> None:
    import importlib

    module, attr = path.split(".")
    if not hasattr(importlib.import_module(module), attr):
        pytest.skip(f"{path} does not exist on this Python")
    if attr.startswith("_"):
        code = f"import {module}\ngetattr({module}, '{attr}')"
    else:
        code = f"import {module}\n{module}.{attr}"
    with pytest.raises(REPLSecurityError):
        REPLExecutor().execute(code, {})


@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_raw_module_from_env_is_seen_through_its_proxy(profile: str) -> None:
    env: dict = {"re": re}
    out = outcome("x = re.enum\nprint(x is None)", profile, env)
    if profile == "fixed":
        assert out == "Execution error: AttributeError: 're.enum' is not available in the sandbox (line 1)"
    else:
        assert out == "True"
    assert outcome("print(re.sub('a', 'b', 'aa'))", profile, env) == "bb"


def test_proxy_errors_do_not_carry_the_module() -> None:
    code = "try:\n    re.nothing\nexcept AttributeError as e:\n    o = e.obj\nprint(o)"
    out = outcome(code, env={"re": re})
    assert "sandboxed" in out


def test_modules_and_host_objects_are_read_only() -> None:
    for code in [
        "re.compile = 1",
        "import math\nmath.pi = 3",
        "json.loads.x = 1",
        "Counter.most_common = 1",
        "setattr(Counter, 'x', 1)",
        "del json.dumps",
    ]:
        with pytest.raises(REPLSecurityError):
            REPLExecutor().execute(code, {"re": re})
    assert re.compile is not None and callable(re.compile)


def test_random_is_per_session_and_never_the_global_generator() -> None:
    state = random.getstate()
    a, b = REPLExecutor(), REPLExecutor()
    code = "import random\nrandom.seed(5)\nprint(random.random())"
    assert a.execute(code, {}) == b.execute(code, {})
    assert random.getstate() == state
    up = REPLExecutor(profile="upstream")
    assert up.execute("random.seed(5)\nprint(random.randint(1, 6))", {}) in list("123456")
    assert random.getstate() == state


@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_type_never_hands_out_real_metaclass_power(profile: str) -> None:
    assert (
        outcome("print(type(1) is int, isinstance(int, type), type(type(1)) is type)", profile)
        == "True True True"
    )
    assert (
        outcome("T = type('T', (), {'kind': 'demo'})\nprint(T, T.kind, T().kind)", profile)
        == "<class 'T'> demo demo"
    )
    with pytest.raises(REPLSecurityError, match="'__getattribute__'"):
        REPLExecutor(profile=profile).execute("B = type('B', (), {'__getattribute__': lambda s, n: 1})", {})
    assert outcome("B = type('B', (Exception,), {'__str__': lambda s: 'x'})\nprint(B())", profile) == "x"
    with pytest.raises(REPLError):
        REPLExecutor(profile=profile).execute("type(type(1))('X', (type,), {})", {})


def test_metaclasses_cannot_be_subclassed() -> None:
    with pytest.raises(REPLSecurityError):
        REPLExecutor().execute("class Meta(type):\n    pass", {})


def test_super_inside_sandbox_classes_only() -> None:
    code = (
        "class A:\n    def __init__(self, v):\n        self.v = v\n    def tag(self):\n"
        "        return 'A'\nclass B(A):\n    def __init__(self):\n        super().__init__(5)\n"
        "    def tag(self):\n        return 'B' + super().tag()\nb = B()\nprint(b.v, b.tag())"
    )
    assert outcome(code) == "5 BA"
    code = "import string\nclass F(string.Formatter):\n    pass\nsuper(string.Formatter, F())"
    with pytest.raises(REPLSecurityError, match="super"):
        REPLExecutor().execute(code, {})
    assert outcome("super", "upstream") == "Execution error: name 'super' is not defined"


def test_string_formatter_as_upstream_predefines_it() -> None:
    assert outcome("string.Formatter", "upstream") == "Execution error: string.Formatter is not safe"
    assert outcome("print(string.ascii_lowercase[:3])", "upstream") == "abc"


def test_iter_with_sentinel_is_a_callable_iterator() -> None:
    assert (
        outcome("vals = [1, 2, 3, 4]\nit = iter(vals.pop, 2)\nprint(list(it), type(it))")
        == "[4, 3] <class 'callable_iterator'>"
    )


@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_raised_interrupts_become_repl_errors(profile: str) -> None:
    for name in ("KeyboardInterrupt", "SystemExit"):
        with pytest.raises(REPLError):
            REPLExecutor(profile=profile).execute(f"raise {name}('x')", {})


def test_a_real_interrupt_still_propagates() -> None:
    from rlm_compat.sandbox import host_call

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        REPLExecutor().execute("stop()", {"stop": host_call(interrupted)})


def test_dir_answers_as_python_for_objects_and_lists_variables() -> None:
    assert outcome("print(dir(re))", env={"re": re}).startswith("['A', 'ASCII'")
    assert outcome("print(dir('a'))") == str(dir("a"))
    assert "gi_frame" not in outcome("def g():\n    yield 1\nprint(dir(g()))")
    assert outcome("x = 1\nprint(dir())", env={"context": ""}) == "['context', 'x']"


def test_missing_attribute_switch() -> None:
    ex = REPLExecutor(profile=Profile.fixed().replace(missing_attr_is_none=True))
    assert ex.execute("print('a'.nope)", {}) == "None"


def test_no_dangerous_builtins() -> None:
    for name in [
        "eval",
        "exec",
        "compile",
        "globals",
        "locals",
        "input",
        "breakpoint",
        "__import__",
    ]:
        for profile in ["fixed", "upstream"]:
            with pytest.raises(REPLError):
                REPLExecutor(profile=profile).execute(f"{name}", {})


def test_open_says_where_the_data_is() -> None:
    """``open`` is a name in fixed (a model's first reflex), refused with a pointer to ``context``."""
    with pytest.raises(REPLSecurityError, match=r"FileNotFoundError: open.. is not available.*`context`"):
        REPLExecutor().execute("open('data.txt')", {})
    out = REPLExecutor().execute("try:\n    open('x')\nexcept OSError as e:\n    print(type(e).__name__)", {})
    assert out == "FileNotFoundError"
    with pytest.raises(REPLError, match="open"):
        REPLExecutor(profile="upstream").execute("open('x')", {})


def test_vars_only_for_objects_the_sandbox_made() -> None:
    ex = REPLExecutor()
    assert ex.execute("class A:\n    def __init__(self):\n        self.x = 1\nvars(A())", {}) == "{'x': 1}"
    for code in ("vars(len)", "vars(re)", "vars(str)", "vars()"):
        with pytest.raises(REPLError):
            ex.execute(code, {"re": re})


def test_endless_itertools_stop_at_the_timeout() -> None:
    from rlm_compat.errors import REPLTimeoutError

    with pytest.raises(REPLTimeoutError):
        REPLExecutor(timeout=0.3).execute("import itertools\nlist(itertools.count())", {})


def test_no_shared_mutable_state_or_module_behind_exposed_names() -> None:
    """Walk public attributes of every exposed module and class: no module, no shared container.

    Method calls (``.clear()``, ``.update()``) need no write guard, so a host-wide dict reachable
    this way would let one session change another's (or the host's) behaviour.
    """
    import collections
    import types

    from rlm_compat.sandbox.modules import module_proxy
    from rlm_compat.sandbox.policy import builtins_for

    mutable = (dict, list, set, bytearray, collections.deque)
    seen: set[int] = set()
    found: list[str] = []

    def walk(obj: object, path: str, depth: int) -> None:
        if id(obj) in seen or depth > 3:
            return
        seen.add(id(obj))
        for name in dir(obj):
            if name.startswith("_") or name == "mro":
                continue
            try:
                value = getattr(obj, name)
            except Exception:
                continue
            if isinstance(value, types.ModuleType):
                found.append(f"{path}.{name}: module")
            elif isinstance(value, mutable) and not isinstance(value, type):
                found.append(f"{path}.{name}: {type(value).__name__}")
            if isinstance(value, type) or type(value).__name__ == "ModuleProxy":
                walk(value, f"{path}.{name}", depth + 1)

    for module in ALLOWED_MODULES:
        if module != "random":
            walk(module_proxy(module), module, 0)
    for profile in (Profile.fixed(), Profile.upstream()):
        for name, value in builtins_for(profile).items():
            if not name.startswith("_") and isinstance(value, type):
                walk(value, name, 0)
    assert found == []
