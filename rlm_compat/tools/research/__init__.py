"""Research comparisons: exact-graded task suites, scripted policies, ``rlm-compat compare``.

The shared vocabulary lives in :mod:`rlm_compat.tools.research.base` (task instances, grades, suites,
run specs and run records); suites, policies, the compare grid and its executors build on it.
"""
