"""The isolation layer: a killable, resource-limited, OS-hardened worker process per session.

Everything that exists because model code must not run in the host process — starting workers
(:mod:`.spawn`, the fork server :mod:`.zygote`, :mod:`.workerinit`, :mod:`.launcher`), the
framed channel and the sealed memory files that carry big texts across (:mod:`.channel`,
:mod:`.mapped`), resource limits and Landlock/seccomp hardening (:mod:`.rlimits`,
:mod:`.hardening`), the worker's side of a session (:mod:`.worker`) and the parent's
(:mod:`.process`) — belongs here: it is what must still hold if the restriction layer is escaped.
The direction is one way: this layer may import :mod:`..restrict` and :mod:`..step` (the inline
engine, host calls and texts, between the two), because the worker runs restricted code
with the same engine the inline runner uses; :mod:`..restrict` never imports this layer, and
nothing here imports the runner choice (:mod:`..runner`) or the RLM loop.
``tests/sandbox/test_sandbox_layers.py`` checks this.
"""
