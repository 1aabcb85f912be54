"""Multi-objective optimisation.

Modules: :mod:`~reprobook.moo.preference_emo` (preference-based NSGA-II on pymoo: a simulated
decision maker, D-PBEMO's preference density, a reward-model baseline).
"""
