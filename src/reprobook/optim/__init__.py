"""Optimisation: stochastic first-order methods (clipped SGD), curvature matrices (Gauss–Newton) and
their exact closed forms."""
