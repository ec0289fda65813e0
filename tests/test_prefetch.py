"""Making an RLM that will call litellm starts litellm's import in the background (issue 26);
`import rlm_compat` and an RLM with its own client still import nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, sys, threading
import rlm_compat
from rlm_compat import RLM
from rlm_compat.testing import ScriptedClient
names = lambda: sorted(t.name for t in threading.enumerate() if t.name == "rlm-compat-import")
after_import = names()
RLM("m", client=ScriptedClient(["FINAL('x')"]))
after_own_client = names()
RLM("openai/gpt-4o-mini")
started = names()
RLM("openai/gpt-4o-mini")
print(json.dumps({"import": after_import, "own": after_own_client, "litellm": started,
                  "again": names()}))
"""


def test_an_rlm_on_litellm_starts_its_import_once_and_nothing_else_does() -> None:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["import"] == [] and seen["own"] == []
    assert seen["litellm"] == ["rlm-compat-import"] and len(seen["again"]) <= 1
