"""Sphinx configuration: the API reference (autodoc over every module of the package) and the docs/
pages (Markdown, through myst-parser), built with ``-W --keep-going -n`` so a cross-reference to a
name that moved, a link to a file that is gone or a page left out fails the build.

Build: ``python -m sphinx -W --keep-going -n -b html docs <out>`` (``nox -s docs``; ``.ci/run``
runs it). Offline by design: no intersphinx, so names of the standard library and of other
packages cannot resolve; :data:`nitpick_ignore_regex` lists exactly those namespaces, and every
``rlm_compat`` name must resolve.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

project = "rlm_compat"
author = "rlm_compat developers"
extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "basic"
html_static_path: list[str] = []
nitpicky = True
myst_heading_anchors = 4
# a literal block that is not valid in its language (a JSON sample with "..."): not a stale reference
suppress_warnings = ["misc.highlighting_failure"]
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# RestrictedPython's and the standard library's docstrings are not ours to keep in shape
autodoc_inherit_docstrings = False

_EXTERNAL = (
    "abc _abc _asyncio aiohttp argparse ast asyncio atexit collections concurrent contextlib "
    "dataclasses enum importlib io json logging multiprocessing os pathlib pprint queue random re "
    "resource RestrictedPython selectors socket string subprocess threading types typing weakref"
)
nitpick_ignore_regex = [
    # the standard library's and other packages' names: they would need intersphinx's inventories,
    # fetched over the network, which this build never does
    (r"py:.*", rf"(?:{'|'.join(_EXTERNAL.split())})(?:\..*)?"),
    # aiohttp's ``web`` as the serve modules import it (under TYPE_CHECKING: not importable here)
    (r"py:class", r"web\.\w+"),
    # a builtin generic in a string annotation, split at its comma by the signature parser
    (r"py:class", r"(?:tuple|dict)\[\w+"),
    # private names in signatures (TypeVars such as ``_T``, helper classes): never documented
    (r"py:(class|obj)", r"rlm_compat(?:\.\w+)*\._\w+"),
]


def package_modules(package: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """Every module of ``package``, itself first, sorted; ``exclude``: names and their submodules."""
    root = importlib.import_module(package)
    found = [package] + [info.name for info in pkgutil.walk_packages(root.__path__, package + ".")]
    return sorted(
        name for name in found if not any(name == ex or name.startswith(ex + ".") for ex in exclude)
    )


class PackageModules(SphinxDirective):
    """``.. package-modules:: rlm_compat`` — one section with ``automodule`` per module, found by
    walking the package: a module that is added or moved is documented without editing a page,
    and a reference to its old place then fails the build."""

    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {"exclude": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        from sphinx.util.nodes import nested_parse_with_titles

        exclude = tuple(self.options.get("exclude", "").split())
        lines: list[str] = []
        for name in package_modules(self.arguments[0], exclude):
            title = f"``{name}``"
            lines += [title, "-" * len(title), "", f".. automodule:: {name}", ""]
        content = StringList(lines, source=self.get_source_info()[0])
        section = nodes.section()
        nested_parse_with_titles(self.state, content, section)
        return list(section.children)


_RAW_ANCHOR = re.compile(r'^<a id="([\w-]+)"></a>$', re.MULTILINE)


def html_anchors(app: Sphinx, docname: str, source: list[str]) -> None:
    """``<a id="x"></a>`` (GitHub's in-page anchors, in generated pages) as MyST targets ``(x)=``,
    so links to them are checked like any other."""
    source[0] = _RAW_ANCHOR.sub(r"(\1)=", source[0])


def resolve_by_import(app: Sphinx, env: Any, node: Any, contnode: nodes.Element) -> nodes.Node | None:
    """Resolve a Python reference Sphinx cannot find as Python would, by importing it.

    The name is tried in the referring class, its module and each enclosing package, then as
    written: ``rlm_compat.record.RunBudget`` (a re-export) or ``Settings`` (a name the module
    imports) links to the documented object where it is defined; a name that imports but is not
    documented (a private helper, an undocumented constant) is shown unlinked. A name that no
    longer imports stays unresolved, and the build fails: that is the point.
    """
    if node.get("refdomain") != "py":
        return None
    target = str(node["reftarget"]).lstrip(".~")
    module = str(node.get("py:module") or "")
    scopes = [f"{module}.{node['py:class']}"] if module and node.get("py:class") else []
    parts = module.split(".") if module else []
    scopes += [".".join(parts[:cut]) for cut in range(len(parts), 0, -1)]
    domain = env.get_domain("py")
    for name in [*(f"{scope}.{target}" for scope in scopes), target]:
        names = name.split(".")
        if _import_name(names) is _MISSING:
            continue
        for cut in range(len(names), 0, -1):
            base = _canonical(domain, _import_name(names[:cut]))
            if base is None:
                continue
            entry = domain.objects.get(".".join([base, *names[cut:]]))
            entry = entry or domain.modules.get(".".join([base, *names[cut:]]))
            if entry is not None:
                return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode)
        return contnode
    return None


_MISSING = object()


def _import_name(parts: list[str]) -> Any:
    """The object ``parts`` names inside the package (a module or an attribute of one), else _MISSING."""
    if not parts or parts[0] != "rlm_compat":
        return _MISSING
    for cut in range(len(parts), 0, -1):
        obj = _module(".".join(parts[:cut]))
        if obj is None:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


@functools.cache
def _module(name: str) -> Any:
    """The module ``name``, or None: each name tried once (most references name no module)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _canonical(domain: Any, obj: Any) -> str | None:
    """Where ``obj`` is documented: a module's name, a class's or function's defining path, or
    (a constant) the documented module attribute that is the same object."""
    if obj is _MISSING:
        return None
    if isinstance(obj, type(sys)):
        return obj.__name__
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and not isinstance(obj, (str, int)):
        return f"{module}.{qualname}"
    return _documented_data(domain).get(id(obj))


_DATA: dict[int, str] = {}


def _documented_data(domain: Any) -> dict[int, str]:
    """``id(value) -> name`` of every documented module constant, made once per build (the write
    phase, when every object is known)."""
    if not _DATA:
        for name, entry in domain.objects.items():
            if entry.objtype == "data":
                value = _import_name(name.split("."))
                if value is not _MISSING:
                    _DATA.setdefault(id(value), str(name))
    return _DATA


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("package-modules", PackageModules)
    app.connect("source-read", html_anchors)
    app.connect("missing-reference", resolve_by_import)
    return {"parallel_read_safe": True}
