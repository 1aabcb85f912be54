"""Statistics: correlation coefficients, inference helpers and their simulations."""
