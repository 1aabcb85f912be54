"""Optimisation algorithms: stochastic first-order methods and their analyses' quantities."""
