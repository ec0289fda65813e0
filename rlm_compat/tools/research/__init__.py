"""Research: exact-graded task suites and scripted policies, and the four research commands.

This package's own modules are the task library every command shares: the vocabulary in
:mod:`rlm_compat.tools.research.base` (task instances, grades, suites, run specs and run records),
corpora, graders, the paper's tasks, the suites and the scripted policies. Each command has its own
room below it: :mod:`.compare` (``rlm-compat compare``), :mod:`.baselines` (``baseline``),
:mod:`.ablation` (``quirks``) and :mod:`.real_trajectories` (``real-corpus``). The rooms import the
task library, never each other, and the library imports none of them.
"""
