"""What the commands make of a run beside the library's record: its live display and its replayable steps.

:mod:`.live` draws a running RLM on a terminal (``rlm-compat run``; the only user of rich), and
:mod:`.steps` reads a recorded run into the per-node steps that replay, the view and the research
tools share. Only the tools use them, so they live here, not in :mod:`rlm_compat.record`: a
program embedding RLMs loads neither, and the library installs without rich.
"""
