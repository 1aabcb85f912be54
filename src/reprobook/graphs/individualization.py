r"""Node individualisation schemes: identifiers appended to the node features of a graph.

Each scheme gives every node an identifier and encodes it, as in the authors' code, by the
``bits``-bit binary code of the identifier (modulo :math:`2^{\text{bits}}`), or for random node
initialisation by ``bits`` uniform numbers. The identifiers of one graph are drawn once, when the
sample is made (the training set is a fixed set of individualised graphs, the object whose
VC dimension the paper bounds):

* ``"none"``: no identifier (a message-passing network then sees only 1-WL information);
* ``"rni"``: random node initialisation, ``bits`` i.i.d. :math:`U[0, 1)` features per node;
* ``"rp"``: a uniformly random permutation of the nodes, its positions as identifiers
  (relational-pooling style);
* ``"tinhofer"``: the Tinhofer rank (:func:`reprobook.graphs.wl.tinhofer_ranks`), a
  permutation-equivariant identifier on Tinhofer graphs;
* ``"tinhofer_w"``: the rank within the node's stable 1-WL class
  (:func:`reprobook.graphs.wl.tinhofer_w_ranks`);
* ``"tinhofer_no_refinement"``: Tinhofer with its refinement steps removed, a broken scheme for
  controls (the identifiers then follow the input numbering).

RP and Tinhofer produce the same kind of features (a permutation of ``0..n-1`` in binary); only
how the permutation is chosen differs: at random, or canonically.
"""
from __future__ import annotations

import numpy as np

from .wl import check_graph, tinhofer_ranks, tinhofer_w_ranks

__all__ = ["SCHEMES", "binary_code", "identifiers", "individualize"]

SCHEMES = ("none", "rni", "rp", "tinhofer", "tinhofer_w", "tinhofer_no_refinement")


def binary_code(ids, bits: int) -> np.ndarray:
    """``(n, bits)`` 0/1 floats: the binary code of ``ids mod 2**bits``, most significant first."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits < 1:
        raise ValueError(f"bits must be a positive int, got {bits!r}")
    ids = np.asarray(ids, dtype=np.int64) % (2 ** bits)
    return ((ids[:, None] >> np.arange(bits - 1, -1, -1)) & 1).astype(np.float32)


def identifiers(scheme: str, n: int, edges, rng: np.random.Generator | None = None):
    """The integer identifiers ``0..n-1`` of a scheme that has them (``rp``, ``tinhofer``,
    ``tinhofer_w``)."""
    if scheme == "rp":
        if rng is None:
            raise ValueError("scheme 'rp' needs a random generator (rng=...)")
        return rng.permutation(n)
    if scheme == "tinhofer":
        return tinhofer_ranks(n, edges)
    if scheme == "tinhofer_w":
        return tinhofer_w_ranks(n, edges)
    if scheme == "tinhofer_no_refinement":
        return tinhofer_ranks(n, edges, refinement=False)
    raise ValueError(f"scheme {scheme!r} has no integer identifiers; use one of rp, tinhofer, "
                     "tinhofer_w, tinhofer_no_refinement")


def individualize(scheme: str, n: int, edges, rng: np.random.Generator | None = None,
                  bits: int = 6) -> np.ndarray:
    """Node features ``(n, 1 + k)``: a constant 1, then the scheme's ``k`` identifier features
    (``k = 0`` for ``"none"``, else ``bits``)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown individualisation scheme {scheme!r}; use one of {SCHEMES}")
    n, e = check_graph(n, edges)
    ones = np.ones((n, 1), dtype=np.float32)
    if scheme == "none":
        return ones
    if scheme == "rni":
        if rng is None:
            raise ValueError("scheme 'rni' needs a random generator (rng=...)")
        return np.hstack([ones, rng.uniform(0.0, 1.0, (n, bits)).astype(np.float32)])
    return np.hstack([ones, binary_code(identifiers(scheme, n, e, rng), bits)])
