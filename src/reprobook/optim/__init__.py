"""Optimisers and their analysis tools: SAM and its perturbation rules, BAR, training loops."""
