"""Where the tools find rlm_compat's files: the package (a resource), and a source checkout's data.

Data shipped in the wheel is a package resource (``rlm_compat/_fixtures``,
``rlm_compat/_reference_fixtures``, see pyproject's ``force-include``); in a source checkout the same
data sits beside the package (``upstream_fixtures/``, ``reference_fixtures/``). Data that only a
checkout has (the real corpus, where ``record`` writes) is found through :func:`source_checkout`,
which says which option to pass when there is none. Nothing counts directories up from a module's
own file, so moving a module never moves what it finds.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .tooling_errors import ToolUsageError

__all__ = ["import_root", "package_dir", "shipped_data", "source_checkout"]


def package_dir() -> Path:
    """The directory of the ``rlm_compat`` package this interpreter imports."""
    return Path(str(files("rlm_compat")))


def import_root() -> Path:
    """The ``sys.path`` entry that holds this rlm_compat: a child's ``PYTHONPATH`` to import the same one."""
    return package_dir().parent


def source_checkout(needed_for: str, option: str) -> Path:
    """The source checkout this rlm_compat is imported from, or a :class:`ToolUsageError` naming
    ``option`` (what to pass instead) when it runs from an installed wheel."""
    root = import_root()
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "rlm-compat"' in pyproject.read_text(encoding="utf-8"):
        return root
    raise ToolUsageError(f"{needed_for} needs a source checkout of rlm_compat: pass {option}")


def shipped_data(resource: str, checkout_dir: str, *, marker: str | None = None) -> Path | None:
    """``rlm_compat/<resource>`` when the wheel ships it, else a source checkout's ``<checkout_dir>``
    (``None`` when neither exists, or neither holds the file ``marker``)."""
    for candidate in (package_dir() / resource, import_root() / checkout_dir):
        if candidate.is_dir() and (marker is None or (candidate / marker).is_file()):
            return candidate
    return None
