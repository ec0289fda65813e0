"""`import rlm_compat` stays fast and offline: no litellm import, no cost-map fetch."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _probe(code: str, **env: str) -> dict[str, object]:
    environ = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    environ.update(env)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_import_does_not_import_litellm() -> None:
    result = _probe(
        "import json, os, sys, rlm_compat, rlm_compat.core\n"
        "print(json.dumps({'litellm': any(m == 'litellm' or m.startswith('litellm.') "
        "for m in sys.modules), 'flag': os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP'),"
        "'lazy': repr(rlm_compat.core.litellm)}))"
    )
    assert result == {
        "litellm": False,
        "flag": "True",
        "lazy": "<lazy module 'litellm' (not loaded)>",
    }


def test_user_choice_of_cost_map_flag_is_kept() -> None:
    result = _probe(
        "import json, os, rlm_compat\n"
        "print(json.dumps({'flag': os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP')}))",
        LITELLM_LOCAL_MODEL_COST_MAP="False",
    )
    assert result == {"flag": "False"}


def test_patch_point_is_the_lazy_module() -> None:
    from unittest.mock import patch

    import rlm_compat.core as core

    sentinel = object()
    with patch("rlm_compat.core.litellm.acompletion", sentinel):
        assert core.litellm.acompletion is sentinel
    assert core.litellm.acompletion is not sentinel
