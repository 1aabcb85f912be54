"""Bandits with preference feedback.

Modules: :mod:`~reprobook.bandits.dueling` (a Bradley–Terry simulated user, double Thompson
sampling and its clustered two-stage form, regret).
"""
