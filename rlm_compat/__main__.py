"""``python -m rlm_compat`` is ``rlm-compat``."""

from .tools.cli import main

raise SystemExit(main())
