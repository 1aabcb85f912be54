"""Imaging inverse problems: forward operators and data-consistency solvers."""
