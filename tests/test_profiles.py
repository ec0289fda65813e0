"""Profiles are data: presets, ablation by replace(), resolution from names and the environment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlm_compat import ConfigurationError, Profile
from rlm_compat.profiles import QUIRKS, UPSTREAM_OFF, resolve_profile


def test_presets_are_all_off_and_all_on() -> None:
    assert not any(Profile.fixed().quirks().values())
    assert list(Profile.upstream().enabled()) == [q for q in QUIRKS if q not in UPSTREAM_OFF]
    assert set(UPSTREAM_OFF) == {"inline_by_default"}  # code runs in the hardened worker in upstream too


@given(st.sampled_from(QUIRKS))
def test_single_switch_ablation(switch: str) -> None:
    ablated = Profile.upstream().replace(**{switch: False})
    assert {q for q in QUIRKS if not getattr(ablated, q)} == {switch} | UPSTREAM_OFF
    assert ablated.name == ("upstream" if switch in UPSTREAM_OFF else f"upstream[{switch}=off]")
    on = "upstream" if switch not in UPSTREAM_OFF else f"upstream[{switch}=on]"
    assert Profile.upstream().replace(**{switch: True}).name == on


def test_unknown_switch_is_typed() -> None:
    with pytest.raises(ConfigurationError, match="unknown profile switch"):
        Profile.fixed().replace(separate_scope=True)


def test_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLM_COMPAT_PROFILE", raising=False)
    assert resolve_profile(None) == Profile.fixed()
    monkeypatch.setenv("RLM_COMPAT_PROFILE", "upstream")
    assert resolve_profile(None) == Profile.upstream()
    custom = Profile.fixed().replace(first_fence_only=True)
    assert resolve_profile(custom) is custom
    with pytest.raises(ConfigurationError, match="unknown profile 'strict'"):
        resolve_profile("strict")
    with pytest.raises(ConfigurationError):
        resolve_profile(3)  # type: ignore[arg-type]


def test_profiles_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Profile.fixed().separate_scopes = True  # type: ignore[misc]


@pytest.mark.parametrize("switch", QUIRKS)
def test_ablation_specs_turn_one_switch(switch: str) -> None:
    without = Profile.named(f"upstream-without:{switch}")
    assert without.name == f"upstream-without:{switch}"
    assert set(without.enabled()) == set(QUIRKS) - UPSTREAM_OFF - {switch}
    with_one = resolve_profile(f"fixed-with:{switch}")
    assert list(with_one.enabled()) == [switch]


def test_ablation_spec_with_two_switches_and_bad_specs() -> None:
    a, b = QUIRKS[:2]
    assert set(Profile.named(f"upstream-without:{a}, {b}").enabled()) == set(QUIRKS) - UPSTREAM_OFF - {a, b}
    for bad in ("upstream-without:", "upstream-without:nope", "fixed-with:x,y", "other:thing"):
        with pytest.raises(ConfigurationError, match=r"switch|unknown profile"):
            Profile.named(bad)


@pytest.mark.parametrize(
    ("profile", "api", "rules", "first"),
    [
        ("fixed", "2fb46cc", "fixed", False),
        ("upstream", "2fb46cc", "2fb46cc", True),
        ("fixed", "0.5", "0.5.0", True),  # the release's standalone directive wins over the profile
        ("upstream", "0.5", "0.5.0", True),
    ],
)
def test_one_final_resolver_is_chosen_from_profile_and_release(
    profile: str, api: str, rules: str, first: bool
) -> None:
    from rlm_compat import RLM
    from rlm_compat._loop import choose_resolver

    settings = RLM("m", profile=profile, api=api).settings
    resolver = choose_resolver(settings.profile, settings.release)
    assert (resolver.name, resolver.first) == (rules, first)
    assert resolver.method == RLM("m", api=api).api.parsed_final_method
