"""Which axis decides each behaviour that both the profile and the release could decide.

The profile (``fixed`` / ``upstream``) says whether 2fb46cc's defects are reproduced; the release
(``api="2fb46cc"`` / ``"0.5"``) says whose contract applies. Most differences belong to one axis
only (a release's defaults, texts, event shape and retry policy: no profile switch touches them).
The table holds the behaviours both axes have a switch for — how a run ends, what the REPL
namespace offers, what happens to an empty reply — and pins the one that decides, and each row is checked both ways: flipping
the deciding axis changes the behaviour (so the row can fail), flipping the other never does.
``"release over profile"``: the release decides where it has a rule of its own (0.5.0), the
profile everywhere else.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from rlm_compat import RLM
from rlm_compat._loop import build_namespace, choose_resolver
from rlm_compat._releases import Release, r050, r2fb46cc, select_release
from rlm_compat.clients import ScriptedClient
from rlm_compat.compat import ApiSemantics
from rlm_compat.settings import Settings

PROFILES = ("fixed", "upstream")
RELEASES = ("2fb46cc", "0.5")


class _NoCalls:
    """A sub-call provider for namespaces that are only looked at."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} called")


def _settings(profile: str, api: str, **extra: Any) -> Settings:
    return RLM("m", profile=profile, api=api, client=ScriptedClient([]), **extra).settings


def _env(settings: Settings, max_depth: int | None = None, *, offer_all: bool = False) -> dict[str, Any]:
    """The namespace of a root node (``offer_all``: as if the profile left out no function)."""
    depth = settings.max_depth if max_depth is None else max_depth
    profile = settings.profile.replace(minimal_env=False) if offer_all else settings.profile
    return build_namespace(
        "q", "c", _NoCalls(), release=settings.release, profile=profile, max_depth=depth
    ).env


def _signature(env: dict[str, Any], name: str) -> str:
    return str(inspect.signature(env[name]))


Probe = Callable[[Settings], object]

DECIDES: dict[str, tuple[str, Probe]] = {
    "FINAL ends a run only as the whole response": (
        "release",
        lambda s: choose_resolver(s.profile, s.release).name == "0.5.0",
    ),
    "FINAL rule set (fixed / 2fb46cc / 0.5.0)": (
        "release over profile",
        lambda s: choose_resolver(s.profile, s.release).name,
    ),
    "FINAL read before the code runs": (
        "release over profile",
        lambda s: choose_resolver(s.profile, s.release).first,
    ),
    "record name of a parsed answer": ("release", lambda s: choose_resolver(s.profile, s.release).method),
    "callable FINAL / FINAL_VAR in the REPL": ("profile", lambda s: "FINAL" in _env(s)),
    "answer dict in the REPL": ("release", lambda s: "answer" in _env(s)),
    "query functions at max_depth=0": ("release", lambda s: "recursive_llm" in _env(s, max_depth=0)),
    "recursive_llm is rlm_query": ("release", lambda s: _signature(_env(s), "recursive_llm")),
    "llm_query / rlm_query in the REPL": ("profile", lambda s: "llm_query" in _env(s)),
    "llm_query takes a context (where offered)": (
        "release",
        lambda s: "context" in _signature(_env(s, offer_all=True), "llm_query"),
    ),
    "empty response is not run": ("release", lambda s: s.api.empty_response_feedback is not None),
}


def _probe(behaviour: str, profile: str, api: str) -> object:
    return DECIDES[behaviour][1](_settings(profile, api))


@pytest.mark.parametrize("behaviour", sorted(DECIDES))
def test_one_axis_decides(behaviour: str) -> None:
    decider = DECIDES[behaviour][0]
    seen = {(p, a): _probe(behaviour, p, a) for p, a in itertools.product(PROFILES, RELEASES)}
    by_profile = any(seen["fixed", a] != seen["upstream", a] for a in RELEASES)
    by_release = any(seen[p, "2fb46cc"] != seen[p, "0.5"] for p in PROFILES)
    if decider == "release":
        assert by_release and not by_profile, seen
    elif decider == "profile":
        assert by_profile and not by_release, seen
    else:  # release over profile: 0.5.0 fixes it whatever the profile; under 2fb46cc the profile does
        assert seen["fixed", "0.5"] == seen["upstream", "0.5"], seen
        assert seen["fixed", "2fb46cc"] != seen["upstream", "2fb46cc"], seen


def test_the_settings_select_one_release_per_preset() -> None:
    settings = _settings("fixed", "0.5")
    assert isinstance(settings.release, Release) and settings.release.api == r050.PRESET
    assert settings.release is select_release(ApiSemantics.v050())
    assert _settings("fixed", "2fb46cc").release.api == r2fb46cc.PRESET
    assert settings.child().release is settings.release


def test_a_replaced_field_is_the_release_data() -> None:
    """The preset stays public data: a changed field changes what the release answers."""
    mixed = RLM("m", api=ApiSemantics.v050().replace(standalone_final_only=False), client=ScriptedClient([]))
    assert choose_resolver(mixed.settings.profile, mixed.settings.release).name == "fixed"
    assert "answer" in _env(mixed.settings)


def test_the_option_table_is_the_release_s() -> None:
    from rlm_compat.options import RELEASE_050_OPTIONS
    from rlm_compat.settings import PARAMETERS

    assert select_release(r050.PRESET).options(PARAMETERS) == RELEASE_050_OPTIONS
    assert RELEASE_050_OPTIONS and select_release(r2fb46cc.PRESET).options(PARAMETERS) == {}
