"""The restriction layer: what sandboxed code may do, decided inside the interpreter.

Everything that acts on the model's code as Python — the compile-time half (the pipeline
:mod:`.prep`, the policy :mod:`.transformer`, the passes after it :mod:`.rewrites`, the name
tables :mod:`.names` it shares with the guards), the runtime guards the rewritten code calls
(:mod:`.attributes`, :mod:`.writes`, :mod:`.classes`, :mod:`.sizes`, :mod:`.iteration`, told
about higher modules through :mod:`.registry`), the builtins mapping they are assembled into
(:mod:`.policy`), the read-only module proxies (:mod:`.modules`, from :mod:`.allowlists`) and the
stand-ins for the few stdlib functions that would reach past the guards, print
capture, warnings, the per-thread execution record and the in-thread deadline, the exceptions a
refusal raises, the CPython releases with exploitable bugs — belongs here, because it works the
same in the host's thread and in a worker and needs no process of its own. This layer never
imports :mod:`..isolate`, :mod:`..step` nor the runners above it (only :mod:`rlm_compat.fences`,
the stdlib-only fence rules): the dependency runs one way, from the process layer down to this
one, since a worker *runs* restricted code while restriction knows nothing of where it runs.
``tests/sandbox/test_sandbox_layers.py`` checks this.
"""
