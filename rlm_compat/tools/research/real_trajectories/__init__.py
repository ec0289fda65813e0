"""``rlm-compat real-corpus``: real model-written code (the source checkout's ``real_corpus/``) run
under CPython, the peers and both profiles; the page ``docs/research/real-trajectories.md``."""

from __future__ import annotations

__all__: list[str] = []
