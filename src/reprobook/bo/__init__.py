"""Bayesian optimisation building blocks: test functions, acquisitions, SVGP and exact-GP surrogates,
the approximation-aware EULBO fit (Maus et al. 2024), a TuRBO trust region and a BO loop."""
