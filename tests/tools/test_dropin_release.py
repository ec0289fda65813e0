"""recursive-llm 0.5.0's own test suite against rlm_compat (needs the package registry).

Set RLM_COMPAT_RELEASE_TESTS=0.5.0 to run it: the sdist is downloaded with pip into a temporary
directory. Acceptance: every test outside rlm_compat/tools/dropin_out_of_scope.toml passes with the 0.5
API preset selected (see ``rlm-compat dropin-tests`` for the per-file table and the failing ids).
"""

from __future__ import annotations

import os

import pytest

from rlm_compat.tools.dropin_tests import out_of_scope, run_release_tests

VERSION = os.environ.get("RLM_COMPAT_RELEASE_TESTS", "")
pytestmark = pytest.mark.skipif(
    not VERSION, reason="RLM_COMPAT_RELEASE_TESTS (a released version, e.g. 0.5.0) is not set"
)


def test_release_suite_passes_outside_the_out_of_scope_list() -> None:
    report = run_release_tests(VERSION)
    ran = {o.test_id for o in report.outcomes if o.status != "out_of_scope"}
    assert not ran & set(out_of_scope(VERSION)), "an out-of-scope test ran"
    assert ran, "no test of the release ran"
    assert report.failures == (), report.render()
    prompt = [o for o in report.outcomes if o.test_id == "rlm_compat::system_prompt"]
    assert [o.status for o in prompt] == ["passed"], report.render()
