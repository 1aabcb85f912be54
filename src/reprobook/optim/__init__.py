"""Optimisation tools: curvature matrices (Gauss–Newton) and their exact closed forms."""
