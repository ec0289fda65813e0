"""Modules as sandboxed code sees them: read-only proxies holding an allowlist of attributes.

A proxy is built once per module from its allowlist (values copied at build time), so the real
module is never consulted while sandboxed code runs: no ``__getattr__`` forwarding, no target
``AttributeError`` (whose ``.obj`` would leak the module) and no route to ``re.enum``,
``json.codecs``, ``datetime.sys``... A raw module found anywhere (the loop puts the real ``re``
into the namespace) is looked at through the same proxy by the attribute guard.
"""

from __future__ import annotations

import importlib
import itertools
import random as _random
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from .context import Session, own_state
from .guards import GuardedFormatter, register_module_proxies
from .regex import sandbox_re_functions
from .violations import ForbiddenAttributeError, ForbiddenWriteError

__all__ = [
    "ALLOWED_MODULES",
    "SESSION_KEY",
    "SESSION_RANDOM",
    "ModuleProxy",
    "SessionRandom",
    "module_proxy",
    "proxy_for_module",
    "real_module",
    "rp_string_proxy",
]

# Each list was read against the module's documented public API; names missing on the running
# Python are skipped. Anything that is a module, holds host-wide mutable state, touches files,
# processes or the network is left out (statistics.NormalDist: its ``samples`` draws from the
# process-wide random generator).
_ALLOWLISTS: dict[str, tuple[str, ...]] = {
    "re": (
        "compile",
        "search",
        "match",
        "fullmatch",
        "split",
        "findall",
        "finditer",
        "sub",
        "subn",
        "escape",
        "error",
        "Pattern",
        "Match",
        "A",
        "ASCII",
        "I",
        "IGNORECASE",
        "L",
        "LOCALE",
        "M",
        "MULTILINE",
        "S",
        "DOTALL",
        "U",
        "UNICODE",
        "X",
        "VERBOSE",
        "NOFLAG",
    ),
    "json": ("loads", "dumps", "load", "dump", "JSONDecodeError", "JSONDecoder", "JSONEncoder"),
    "math": tuple(n for n in dir(importlib.import_module("math")) if not n.startswith("_")),
    "datetime": (
        "date",
        "datetime",
        "time",
        "timedelta",
        "timezone",
        "tzinfo",
        "MINYEAR",
        "MAXYEAR",
        "UTC",
    ),
    "collections": (
        "Counter",
        "defaultdict",
        "OrderedDict",
        "deque",
        "namedtuple",
        "ChainMap",
    ),
    "itertools": (
        "accumulate",
        "batched",
        "chain",
        "combinations",
        "combinations_with_replacement",
        "compress",
        "count",
        "cycle",
        "dropwhile",
        "filterfalse",
        "groupby",
        "islice",
        "pairwise",
        "permutations",
        "product",
        "repeat",
        "starmap",
        "takewhile",
        "tee",
        "zip_longest",
    ),
    "functools": (
        "reduce",
        "partial",
        "lru_cache",
        "cache",
        "cmp_to_key",
        "total_ordering",
    ),
    "statistics": (
        "mean",
        "fmean",
        "geometric_mean",
        "harmonic_mean",
        "median",
        "median_low",
        "median_high",
        "median_grouped",
        "mode",
        "multimode",
        "quantiles",
        "pstdev",
        "pvariance",
        "stdev",
        "variance",
        "covariance",
        "correlation",
        "linear_regression",
        "StatisticsError",
    ),
    "string": (
        "ascii_letters",
        "ascii_lowercase",
        "ascii_uppercase",
        "digits",
        "hexdigits",
        "octdigits",
        "punctuation",
        "printable",
        "whitespace",
        "capwords",
        "Template",
        "Formatter",
    ),
    "textwrap": ("wrap", "fill", "shorten", "dedent", "indent"),
    "random": (
        "random",
        "randint",
        "randrange",
        "choice",
        "choices",
        "shuffle",
        "sample",
        "uniform",
        "gauss",
        "normalvariate",
        "lognormvariate",
        "expovariate",
        "vonmisesvariate",
        "gammavariate",
        "triangular",
        "betavariate",
        "paretovariate",
        "weibullvariate",
        "getrandbits",
        "randbytes",
        "binomialvariate",
        "seed",
        "Random",
    ),
    "heapq": (
        "heappush",
        "heappop",
        "heapify",
        "heapreplace",
        "heappushpop",
        "nlargest",
        "nsmallest",
        "merge",
    ),
    "bisect": ("bisect", "bisect_left", "bisect_right", "insort", "insort_left", "insort_right"),
    # csv: no register_dialect / unregister_dialect / field_size_limit (process-wide state)
    "csv": (
        "reader",
        "writer",
        "DictReader",
        "DictWriter",
        "Sniffer",
        "Dialect",
        "excel",
        "excel_tab",
        "unix_dialect",
        "get_dialect",
        "list_dialects",
        "Error",
        "QUOTE_ALL",
        "QUOTE_MINIMAL",
        "QUOTE_NONE",
        "QUOTE_NONNUMERIC",
        "QUOTE_STRINGS",
        "QUOTE_NOTNULL",
    ),
    "io": ("StringIO", "BytesIO"),
    # hashlib: no pbkdf2_hmac / scrypt (their cost is one uninterruptible C call the caller sizes)
    "hashlib": (
        "md5",
        "sha1",
        "sha224",
        "sha256",
        "sha384",
        "sha512",
        "sha3_224",
        "sha3_256",
        "sha3_384",
        "sha3_512",
        "shake_128",
        "shake_256",
        "blake2b",
        "blake2s",
        "new",
        "algorithms_available",
        "algorithms_guaranteed",
        "file_digest",
    ),
    # decimal: the contexts are the session's own (see SessionDecimal); the module-wide
    # DefaultContext / BasicContext / ExtendedContext templates are not handed out.
    "decimal": (
        "Decimal",
        "Context",
        "getcontext",
        "setcontext",
        "localcontext",
        "DecimalException",
        "Clamped",
        "InvalidOperation",
        "DivisionByZero",
        "Inexact",
        "Rounded",
        "Subnormal",
        "Overflow",
        "Underflow",
        "FloatOperation",
        "DecimalTuple",
        "ROUND_UP",
        "ROUND_DOWN",
        "ROUND_CEILING",
        "ROUND_FLOOR",
        "ROUND_HALF_UP",
        "ROUND_HALF_DOWN",
        "ROUND_HALF_EVEN",
        "ROUND_05UP",
        "MAX_PREC",
        "MAX_EMAX",
        "MIN_EMIN",
        "MIN_ETINY",
        "HAVE_THREADS",
        "HAVE_CONTEXTVAR",
    ),
    "fractions": ("Fraction",),
    # operator: attrgetter / methodcaller take attribute names at run time, so they are the
    # guarded versions; mul / pow / lshift pass the size guards; setitem / delitem the write guard.
    "operator": (
        "itemgetter",
        "attrgetter",
        "methodcaller",
        "lt",
        "le",
        "eq",
        "ne",
        "ge",
        "gt",
        "not_",
        "truth",
        "is_",
        "is_not",
        "abs",
        "add",
        "and_",
        "floordiv",
        "index",
        "inv",
        "invert",
        "lshift",
        "mod",
        "mul",
        "matmul",
        "neg",
        "or_",
        "pos",
        "pow",
        "rshift",
        "sub",
        "truediv",
        "xor",
        "concat",
        "contains",
        "countOf",
        "indexOf",
        "getitem",
        "setitem",
        "delitem",
        "length_hint",
        "call",
        "iadd",
        "iand",
        "iconcat",
        "ifloordiv",
        "imod",
        "imatmul",
        "ior",
        "irshift",
        "isub",
        "itruediv",
        "ixor",
    ),
    # dataclasses: dataclass / make_dataclass act only on classes the sandbox creates
    "dataclasses": (
        "dataclass",
        "field",
        "Field",
        "fields",
        "asdict",
        "astuple",
        "make_dataclass",
        "replace",
        "is_dataclass",
        "FrozenInstanceError",
        "InitVar",
        "KW_ONLY",
        "MISSING",
    ),
    # typing: no get_type_hints / ForwardRef (they eval annotation strings unrestricted), no
    # decorators that mark their argument in place (final, override, no_type_check,
    # runtime_checkable, dataclass_transform) or fill process-wide registries (overload), no
    # reveal_type (writes to the host's stderr)
    "typing": (
        "Any",
        "AnyStr",
        "Annotated",
        "Callable",
        "ClassVar",
        "Collection",
        "Container",
        "Counter",
        "DefaultDict",
        "Deque",
        "Dict",
        "Final",
        "FrozenSet",
        "Generator",
        "Generic",
        "Hashable",
        "Iterable",
        "Iterator",
        "List",
        "Literal",
        "LiteralString",
        "Mapping",
        "MutableMapping",
        "MutableSequence",
        "MutableSet",
        "NamedTuple",
        "Never",
        "NewType",
        "NoReturn",
        "Optional",
        "OrderedDict",
        "ParamSpec",
        "Protocol",
        "Reversible",
        "Self",
        "Sequence",
        "Set",
        "Sized",
        "SupportsAbs",
        "SupportsFloat",
        "SupportsIndex",
        "SupportsInt",
        "SupportsRound",
        "Text",
        "Tuple",
        "Type",
        "TypeAlias",
        "TypeGuard",
        "TypeVar",
        "TypedDict",
        "Union",
        "TYPE_CHECKING",
        "cast",
        "assert_never",
        "assert_type",
        "get_args",
        "get_origin",
    ),
    "unicodedata": (
        "lookup",
        "name",
        "decimal",
        "digit",
        "numeric",
        "category",
        "bidirectional",
        "combining",
        "east_asian_width",
        "mirrored",
        "decomposition",
        "normalize",
        "is_normalized",
        "unidata_version",
    ),
    "difflib": (
        "SequenceMatcher",
        "Differ",
        "HtmlDiff",
        "get_close_matches",
        "unified_diff",
        "context_diff",
        "ndiff",
        "restore",
        "diff_bytes",
        "IS_LINE_JUNK",
        "IS_CHARACTER_JUNK",
        "Match",
    ),
    # time: sleep is deadline-aware; no tzset (process-wide), no clock setters
    "time": (
        "time",
        "time_ns",
        "perf_counter",
        "perf_counter_ns",
        "monotonic",
        "monotonic_ns",
        "process_time",
        "process_time_ns",
        "thread_time",
        "thread_time_ns",
        "sleep",
        "gmtime",
        "localtime",
        "mktime",
        "asctime",
        "ctime",
        "strftime",
        "strptime",
        "struct_time",
        "timezone",
        "altzone",
        "daylight",
        "tzname",
    ),
    "base64": (
        "b64encode",
        "b64decode",
        "standard_b64encode",
        "standard_b64decode",
        "urlsafe_b64encode",
        "urlsafe_b64decode",
        "b32encode",
        "b32decode",
        "b32hexencode",
        "b32hexdecode",
        "b16encode",
        "b16decode",
        "a85encode",
        "a85decode",
        "b85encode",
        "b85decode",
        "encodebytes",
        "decodebytes",
    ),
    "copy": ("copy", "deepcopy", "replace", "Error"),
    # pprint: printing goes to the step's output (Python's writes to sys.stdout)
    "pprint": ("pprint", "pformat", "pp", "PrettyPrinter", "isreadable", "isrecursive", "saferepr"),
    "html": ("escape", "unescape"),
    "urllib": ("parse",),
    "urllib.parse": (
        "urlparse",
        "urlunparse",
        "urlsplit",
        "urlunsplit",
        "urljoin",
        "urldefrag",
        "quote",
        "quote_plus",
        "quote_from_bytes",
        "unquote",
        "unquote_plus",
        "unquote_to_bytes",
        "urlencode",
        "parse_qs",
        "parse_qsl",
        "ParseResult",
        "SplitResult",
        "DefragResult",
        "ParseResultBytes",
        "SplitResultBytes",
        "DefragResultBytes",
    ),
}

ALLOWED_MODULES: tuple[str, ...] = tuple(sorted(_ALLOWLISTS))
"""Modules ``import`` accepts (in profiles that allow imports)."""


_REAL: dict[str, types.ModuleType] = {}
"""The module behind each allowlisted proxy, kept here rather than on the proxy itself."""


class ModuleProxy:
    """Read-only stand-in for one module: its allowlisted attributes and nothing else."""

    def __init__(self, label: str, attrs: dict[str, Any], real: types.ModuleType | None) -> None:
        d = object.__getattribute__(self, "__dict__")
        d.update(attrs)
        d["_ModuleProxy__label"] = label
        if real is not None:
            _REAL[label] = real

    def __getattr__(self, name: str) -> Any:
        d = object.__getattribute__(self, "__dict__")
        label = d["_ModuleProxy__label"]
        real = _REAL.get(label)
        if real is None:
            raise ForbiddenAttributeError(f"module {label!r} is not available in the sandbox")
        if not name.startswith("__") and hasattr(real, name):
            raise ForbiddenAttributeError(f"'{label}.{name}' is not available in the sandbox")
        raise AttributeError(f"module {label!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise ForbiddenWriteError("modules are read-only in the sandbox")

    def __delattr__(self, name: str) -> None:
        raise ForbiddenWriteError("modules are read-only in the sandbox")

    def __dir__(self) -> list[str]:
        return _public(object.__getattribute__(self, "__dict__"))

    def __repr__(self) -> str:
        label = object.__getattribute__(self, "__dict__")["_ModuleProxy__label"]
        return f"<module {label!r} (sandboxed)>"

    def __reduce__(self) -> Any:
        raise TypeError("sandboxed modules cannot be pickled")


def real_module(proxy: ModuleProxy) -> types.ModuleType | None:
    """The module a proxy stands for (host-side only: comparisons, reports)."""
    return _REAL.get(object.__getattribute__(proxy, "__dict__")["_ModuleProxy__label"])


def _public(d: dict[str, Any]) -> list[str]:
    return sorted(k for k in d if not k.startswith("_"))


class SessionRandom:
    """``random`` for sandboxed code: the functions of its own session's ``Random``.

    The process-wide generator (which host code and other sessions share) is never reachable;
    ``random.seed(1)`` seeds only the session calling it, and only during one of its steps: code
    of a session running elsewhere (a function handed to another executor, called by the host)
    gets a throwaway generator. The shared instance (a raw ``random`` module seen through
    :func:`proxy_for_module`) finds the session from the calling sandboxed frame's builtins.
    """

    __slots__ = ("_session",)

    def __init__(self, session: Session | None = None) -> None:
        object.__setattr__(self, "_session", session)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in _ALLOWLISTS["random"]:
            raise ForbiddenAttributeError(f"'random.{name}' is not available in the sandbox")
        if name == "Random":
            return _random.Random
        session = object.__getattribute__(self, "_session")
        if session is None:
            session = _calling_session()
        state = own_state(session) if session is not None else None
        rng = state.session.random if state is not None else _random.Random()
        return getattr(rng, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise ForbiddenWriteError("modules are read-only in the sandbox")

    def __dir__(self) -> list[str]:
        return sorted(_ALLOWLISTS["random"])

    def __repr__(self) -> str:
        return "<module 'random' (sandboxed, per session)>"

    def __reduce__(self) -> Any:
        raise TypeError("sandboxed modules cannot be pickled")


SESSION_KEY = "_rlm_session_"
"""Where a session's builtins layer names its session (sandboxed code cannot spell it)."""


def _calling_session() -> Session | None:
    """The session of the nearest sandboxed frame up the stack (None if there is none)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<rlm-repl-"):
            session = frame.f_builtins.get(SESSION_KEY)
            return session if isinstance(session, Session) else None
        frame = frame.f_back
    return None


SESSION_RANDOM = SessionRandom()


def _interruptible(factory: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """An endless itertools iterator re-yielded from Python, so a timeout can stop its consumer.

    ``list(itertools.count())`` would otherwise be one endless C call that no timeout reaches.
    """

    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        # An explicit loop, not ``yield from``: resuming after ``yield from`` skips the check
        # for pending asynchronous exceptions, so the timeout would never land.
        for item in factory(*args, **kwargs):  # noqa: UP028
            yield item

    wrapper.__name__ = factory.__name__
    wrapper.__doc__ = factory.__doc__
    return wrapper


def _repeat(obj: Any, *times: Any) -> Iterator[Any]:
    if times:
        return itertools.repeat(obj, *times)
    return _interruptible(itertools.repeat)(obj)


def _overrides(name: str) -> dict[str, Any]:
    from . import stdlib

    if name == "urllib":
        return {"parse": module_proxy("urllib.parse")}
    return {
        **stdlib.overrides(),
        "re": sandbox_re_functions(),
        "string": {"Formatter": GuardedFormatter},
        "itertools": {
            "count": _interruptible(itertools.count),
            "cycle": _interruptible(itertools.cycle),
            "repeat": _repeat,
        },
    }.get(name, {})


_lock = threading.RLock()
_proxies: dict[str, Any] = {}
_by_module: dict[int, Any] = {}


def module_proxy(name: str) -> Any:
    """The proxy for allowlisted module ``name`` (built once, shared: it is immutable)."""
    proxy = _proxies.get(name)
    if proxy is not None:
        return proxy
    with _lock:
        proxy = _proxies.get(name)
        if proxy is None:
            proxy = _build(name)
            _proxies[name] = proxy
        return proxy


def _build(name: str) -> Any:
    if name == "random":
        return SESSION_RANDOM
    real = importlib.import_module(name)
    overrides = _overrides(name)
    attrs: dict[str, Any] = {"__name__": name, "__doc__": real.__doc__}
    for attr in _ALLOWLISTS[name]:
        if attr in overrides:
            attrs[attr] = overrides[attr]
        elif hasattr(real, attr):
            value = getattr(real, attr)
            if not isinstance(value, types.ModuleType):
                attrs[attr] = value
    return ModuleProxy(name, attrs, real)


class _RPStringProxy(ModuleProxy):
    """``string`` as 2fb46cc predefines it (RestrictedPython's delegator): no ``Formatter``."""

    def __getattr__(self, name: str) -> Any:
        if name == "Formatter":
            raise NotImplementedError("string.Formatter is not safe")
        return ModuleProxy.__getattr__(self, name)


def rp_string_proxy() -> Any:
    """The ``string`` of RestrictedPython's utility builtins, on top of the ``string`` proxy."""
    proxy = _proxies.get("string:rp")
    if proxy is None:
        base = object.__getattribute__(module_proxy("string"), "__dict__")
        attrs = {k: v for k, v in base.items() if not k.startswith("_") and k != "Formatter"}
        proxy = _RPStringProxy("string", attrs, importlib.import_module("string"))
        _proxies["string:rp"] = proxy
    return proxy


_DENIED: dict[str, ModuleProxy] = {}


def proxy_for_module(module: types.ModuleType) -> Any:
    """How sandboxed code sees a raw module object it got hold of: proxy, or an empty one."""
    proxy = _by_module.get(id(module))
    if proxy is not None:
        return proxy
    name = getattr(module, "__name__", None)
    if isinstance(name, str) and name in _ALLOWLISTS and sys.modules.get(name) is module:
        proxy = module_proxy(name)
        with _lock:
            _by_module[id(module)] = proxy
        return proxy
    label = name if isinstance(name, str) else "?"
    with _lock:
        denied = _DENIED.get(label)
        if denied is None:
            denied = ModuleProxy(label, {}, None)
            _DENIED[label] = denied
    return denied


register_module_proxies(proxy_for_module, ModuleProxy, SessionRandom)
