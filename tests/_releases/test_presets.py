"""Each release's preset is registered by its own module; ``api=`` names and the option tag follow it."""

from __future__ import annotations

import pytest

from rlm_compat import RLM
from rlm_compat._releases import r050, r2fb46cc, select_release
from rlm_compat.compat import ApiSemantics, resolve_api
from rlm_compat.errors import ConfigurationError
from rlm_compat.options import RELEASE_050_OPTIONS
from rlm_compat.settings import PARAMETERS


@pytest.mark.parametrize(
    ("name", "module"),
    [("2fb46cc", r2fb46cc), ("cc7a826", r2fb46cc), ("0.1", r2fb46cc), ("0.5", r050), ("0.5.0", r050)],
)
def test_every_api_name_is_its_release_modules_preset(name: str, module: object) -> None:
    preset = module.PRESET
    assert resolve_api(name) is preset and ApiSemantics.named(name) is preset
    assert preset.release == module.NAME


def test_the_classmethods_are_the_registered_presets() -> None:
    assert ApiSemantics.v050() is r050.PRESET and ApiSemantics.v2fb46cc() is r2fb46cc.PRESET
    assert ApiSemantics() == r2fb46cc.PRESET  # the field defaults are 2fb46cc's contract


def test_an_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown api '0\.9'; choose one of \['0\.1', '0\.5'"):
        ApiSemantics.named("0.9")


def test_a_changed_preset_keeps_its_release_and_option_table() -> None:
    custom = ApiSemantics.v050().replace(name="mine", strict_limits=False)
    assert select_release(custom).api.release == "0.5.0"
    assert select_release(custom).options(PARAMETERS) == RELEASE_050_OPTIONS
    assert RLM("m", api=custom, max_iterations=0).max_iterations == 0
