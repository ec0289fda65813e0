"""``python -m rlm_compat`` is ``rlm-compat``."""

from .tools.cli import console_main

console_main()
