"""Self-contained HTML pages from a Jinja2 template: trajectory, comparison and conformance views.

Every page carries its CSS, script and data inline and a Content-Security-Policy allowing only its
own nonce-tagged script, so it opens from ``file://``, offline, attached to a bug report. Data goes
in a ``<script type="application/json">`` block (``<``, ``>`` and ``&`` written as ``\\u`` escapes so
no text can close the block) and the page builds DOM nodes from it with ``textContent``; what
the templates print themselves is escaped by Jinja2's autoescape.
"""

from __future__ import annotations

import base64
import datetime
import json
import secrets
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ... import __version__
from .highlight import highlight_tokens, style_css
from .model import TrajectoryModel, ViewInputError, ViewMissingError

__all__ = ["page", "require", "script_json", "trajectory_page"]

TEMPLATES = Path(__file__).with_name("templates")


def require() -> None:
    """Fail with an install hint, before any work, when the ``view`` extra is missing."""
    import importlib.util

    missing = [name for name in ("jinja2", "pygments") if importlib.util.find_spec(name) is None]
    if missing:
        raise ViewMissingError(
            f"rlm-compat view needs {' and '.join(missing)}: pip install 'rlm-compat[view]'"
        )


@lru_cache(maxsize=1)
def _environment() -> Any:
    require()
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


_JSON_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def script_json(value: Any) -> Any:
    """``value`` as JSON that is safe inside ``<script type="application/json">`` (a Markup)."""
    from markupsafe import Markup

    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return Markup(text.translate(_JSON_ESCAPES))  # every "<", ">" and "&" is escaped above


def page(template: str, *, title: str, view_kind: str, source: str = "", **context: Any) -> str:
    """Render ``template`` with the common page context (title, version, nonce, styles)."""
    environment = _environment()
    return str(
        environment.get_template(template).render(
            title=title,
            view_kind=view_kind,
            source=source,
            version=__version__,
            generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            nonce=secrets.token_urlsafe(18),
            pygments_css=_markup(style_css(".hl")),
            back_link=context.pop("back_link", None),
            **context,
        )
    )


def _markup(text: str) -> Any:
    from markupsafe import Markup

    return Markup(text)  # Pygments' own style sheet: no input text in it


def trajectory_payload(model: TrajectoryModel) -> dict[str, Any]:
    """The embedded data of a trajectory page: the model plus highlight tokens and node totals."""
    data = model.to_json()
    by_id = {node["node_id"]: node for node in data["nodes"]}
    for node, source in zip(data["nodes"], model.nodes, strict=True):
        node["totals"] = source.totals()
    for node in reversed(data["nodes"]):  # children start after their parent: sum bottom-up
        own = node["totals"]
        tree = node.setdefault("subtree", {"calls": 0, "tokens": 0, "cost_usd": 0.0})
        tree["calls"] += own["calls"]
        tree["tokens"] += own["tokens"] or 0
        tree["cost_usd"] += own["cost_usd"] or 0.0
        parent = by_id.get(node["parent_id"])
        if parent is not None:
            total = parent.setdefault("subtree", {"calls": 0, "tokens": 0, "cost_usd": 0.0})
            for key in ("calls", "tokens", "cost_usd"):
                total[key] += tree[key]
    for node in data["nodes"]:
        if node["kind"] != "rlm" or model.redacted:
            continue
        for step in node["steps"]:
            if step["reply"] is not None:  # the page rebuilds the text from the tokens
                step["hl_reply"] = highlight_tokens(step.pop("reply"))
            if step["code"] is not None:
                step["hl_code"] = highlight_tokens(step["code"])
    return data


def trajectory_page(
    model: TrajectoryModel | None,
    *,
    source: str = "",
    record: dict[str, Any] | None = None,
    back_link: str | None = None,
    title: str | None = None,
) -> str:
    """A trajectory view (``model`` None: a run without a trajectory, shown by its record)."""
    return page(
        "trajectory.html.j2",
        title=title or (model.title if model else "run"),
        view_kind="trajectory",
        source=source,
        trajectory=model,
        record=record,
        back_link=back_link,
        payload=script_json(trajectory_payload(model)) if model is not None else "",
    )


def data_uri_png(path: Path) -> str:
    """A PNG file as a ``data:`` URI (checked to be a PNG: a page must not inline anything else)."""
    raw = path.read_bytes()
    if not raw.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ViewInputError(f"{path} is not a PNG file")
    return "data:image/png;base64," + base64.b64encode(raw).decode("ascii")


def short(text: str | None, limit: int = 120) -> str:
    """A one-line excerpt for table cells."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"


def group(items: Iterable[Any], key: Callable[[Any], Any]) -> dict[Any, list[Any]]:
    """Items by key, keys in first-seen order."""
    out: dict[Any, list[Any]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out
