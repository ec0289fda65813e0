"""Guards, builtins, imports and module proxies, in both profiles."""

from __future__ import annotations

import random
import re

import pytest
import upstream_truth as truth

from rlm_compat.errors import REPLError, REPLSecurityError
from rlm_compat.profiles import Profile
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.restrict.allowlists import ALLOWED_MODULES


def outcome(code: str, profile: str = "fixed", env: dict | None = None) -> str:
    try:
        return REPLExecutor(profile=profile).execute(code, {} if env is None else env)
    except REPLError as exc:
        return str(exc)


# rlm_compat's own expectation in profile fixed, by case of inputs/repl/guards.toml (what upstream
# does with the same code is recorded in the fixtures).
FIXED_GUARDS = {
    "inplace_name": "3",
    "inplace_list_alias": "[1, 2]",
    "inplace_item": "{'k': 2}",
    "unpack": "3",
    "star_unpack": "[2, 3]",
    "nested_unpack": "10",
    "for_unpack": "a 1",
    "item_write": "[5, 2]",
    "slice_write": "[9, 3]",
    "item_delete": "{'b': 2}",
    "slice_delete": "[1]",
    "counter_item": "1",
    "class_with_methods": "10",
    "class_dunders": "1 3",
    "subclass_exception": "caught x",
    "getattr_builtin": "A dflt",
    "hasattr_builtin": "True False",
    "setattr_user_object": "3",
    "exceptions": "True",
    "fstring": "003 3 x",
    "walrus": "4",
    "format_positional": "1 and b",
    "format_named": "x!",
    "format_spec": "3.14|   a",
    "format_item_walk": "5",
    "format_map": "1-2",
    "star_call": "1+2",
    "kwargs_call": "['a']",
    "annotated_assign": "3",
    "nonlocal": "2",
    "injected_names": "[2] 2020 1 2 0",
    "missing_attribute": "Execution error: AttributeError: 'str' object has no attribute 'nope' (line 1)",
}


GUARDS = truth.recorded("guards")


@pytest.mark.parametrize("line", GUARDS, ids=[truth.name(line) for line in GUARDS])
def test_guard_as_upstream_recorded(line: dict) -> None:
    truth.skip_unless_comparable(line)
    [step] = truth.recorded_steps(line)
    assert outcome(line["input"]["steps"][0], "upstream") == truth.shown(step)


@pytest.mark.parametrize(("name", "fixed"), FIXED_GUARDS.items(), ids=list(FIXED_GUARDS))
def test_guard_fixed(name: str, fixed: str) -> None:
    [code] = truth.line(f"repl.guards.{name}")["input"]["steps"]
    assert outcome(code) == fixed


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

    from rlm_compat.sandbox.restrict.modules import module_proxy
    from rlm_compat.sandbox.restrict.policy import builtins_for

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
