"""Graphs as plain arrays: Weisfeiler-Leman refinement, individualisation, generators."""
