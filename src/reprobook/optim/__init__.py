"""Optimisation: stochastic first-order methods (clipped SGD, SAM and its perturbation rules, BAR),
their training loops, and curvature matrices (Gauss–Newton) with their exact closed forms."""
