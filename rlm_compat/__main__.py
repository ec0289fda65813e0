"""``python -m rlm_compat`` is ``rlm-compat``."""

from .cli import main

raise SystemExit(main())
