"""Approximate nearest-neighbour search: proximity graphs, their searches, and the tools to score them.

Modules: :mod:`~reprobook.ann.exact` (brute-force neighbours and recall),
:mod:`~reprobook.ann.graph` (a Vamana-style proximity graph and greedy/beam search that count
distance computations), :mod:`~reprobook.ann.cspg` (crossing sparse proximity graphs),
:mod:`~reprobook.ann.datasets` (generated and bundled vector sets),
:mod:`~reprobook.ann.evaluate` (recall-versus-cost sweeps, cost at equal recall).
"""
