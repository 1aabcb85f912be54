"""Reinforcement learning on small, exactly solvable problems.

Modules: :mod:`~reprobook.rl.mdp` (tabular MDPs, exact evaluation, Bellman operators),
:mod:`~reprobook.rl.envs` (Garnet random MDPs and hand-built hard instances) and
:mod:`~reprobook.rl.pmd` (policy mirror descent and its lookahead variant h-PMD).
"""
