"""The conformance suite: recorded upstream behaviour, a deviations registry, and a runner.

``inputs/`` holds hand-written cases (no expectations); ``rlm-compat record`` runs them against
ysz/recursive-llm checkouts (``driver.py`` inside upstream's own Python) and writes the fixtures in
``upstream_fixtures/``; ``rlm-compat conformance`` replays the fixtures against rlm_compat's
profiles and other implementations and reports, case by case, where and why they differ. Every
implementation is reached through the published protocol (``protocol.py``, docs/protocol.md) and
named in one registry (``implementations.py``). See docs/conformance.md.
"""

from __future__ import annotations

__all__: list[str] = []
