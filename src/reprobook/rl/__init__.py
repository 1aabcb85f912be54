"""Reinforcement learning on small, exactly solvable problems.

Modules: :mod:`~reprobook.rl.mdp` (tabular MDPs, exact evaluation, Bellman operators),
:mod:`~reprobook.rl.envs` (Garnet random MDPs and hand-built hard instances),
:mod:`~reprobook.rl.pmd` (policy mirror descent and its lookahead variant h-PMD),
:mod:`~reprobook.rl.finite_horizon` (finite-horizon exact evaluation by dynamic programming,
occupancies, trajectory sampling), :mod:`~reprobook.rl.context_chain` (a chain where one mistake is
fatal, for imitation learning), :mod:`~reprobook.rl.behavior_cloning` (LogLossBC for
stationary and non-stationary log-linear policies) and :mod:`~reprobook.rl.dagger` (DAgger at a
fixed label budget).
"""
