"""1-WL refinement, Tinhofer individualisation, CSL generators and individualisation schemes."""
import networkx as nx
import numpy as np
import pytest

from reprobook.graphs.generators import (CSL_SKIPS, csl_graph, csl_graphs, random_regular_graphs,
                                         relabel, relabelled_copies)
from reprobook.graphs.individualization import binary_code, individualize
from reprobook.graphs.wl import (check_graph, is_discrete, neighbour_table, refine,
                                 sorted_adjacency, tinhofer_ranks, tinhofer_w_ranks, wl_histograms)


def path(n):
    return n, np.array([[i, i + 1] for i in range(n - 1)])


def test_refine_on_a_path_is_the_distance_to_the_ends():
    n, e = path(5)
    c = refine(neighbour_table(n, e))
    assert c[0] == c[4] and c[1] == c[3] and len(set(c.tolist())) == 3


def test_refinement_is_canonical_under_relabelling():
    rng = np.random.default_rng(0)
    g = nx.gnm_random_graph(12, 20, seed=1)
    n, e = 12, np.array(g.edges())
    c = refine(neighbour_table(n, e))
    perm = rng.permutation(n)
    c2 = refine(neighbour_table(n, relabel(n, e, perm)))
    assert np.array_equal(c2[perm], c)          # node i's colour moved to its new name perm[i]


def test_one_wl_cannot_tell_the_csl_graphs_apart_but_ids_can():
    graphs = csl_graphs()
    assert len(set(wl_histograms(graphs))) == 1
    ids = [np.arange(n) for n, _ in graphs]           # identifiers leaked as initial colours
    assert len(set(wl_histograms(graphs, ids))) == len(graphs)
    assert len(set(wl_histograms([path(4), (4, np.array([[0, 1], [1, 2], [2, 3], [3, 0]]))]))) == 2


def test_csl_graphs_are_the_benchmarks_circulants():
    for s in CSL_SKIPS:
        n, e = csl_graph(41, s)
        g = nx.Graph(e.tolist())
        assert n == 41 and len(e) == 82 and set(dict(g.degree()).values()) == {4}
        assert g.has_edge(0, 1) and g.has_edge(0, s) and g.has_edge(0, 41 - s)
    with pytest.raises(ValueError, match="skip"):
        csl_graph(41, 21)


@pytest.mark.parametrize("skip", CSL_SKIPS)
def test_tinhofer_is_discrete_and_equivariant_on_csl(skip):
    rng = np.random.default_rng(skip)
    n, e = csl_graph(41, skip)
    canon = sorted_adjacency(n, e, tinhofer_ranks(n, e))
    assert is_discrete(tinhofer_ranks(n, e))
    for _ in range(3):
        e2 = relabel(n, e, rng.permutation(n))
        assert np.array_equal(sorted_adjacency(n, e2, tinhofer_ranks(n, e2)), canon)
        assert np.array_equal(sorted_adjacency(n, e2, tinhofer_ranks(n, e2, choose="last")), canon)


def test_tinhofer_depends_on_the_choice_on_asymmetric_regular_graphs():
    # random 3-regular graphs are 1-WL-uniform but (typically) asymmetric: the first
    # individualised node is not determined up to automorphism, so the choice shows
    graphs = random_regular_graphs(4, 3, 16, np.random.default_rng(0))
    differs = [not np.array_equal(sorted_adjacency(n, e, tinhofer_ranks(n, e)),
                                  sorted_adjacency(n, e, tinhofer_ranks(n, e, choose="last")))
               for n, e in graphs]
    assert any(differs)
    assert all(len(set(dict(nx.Graph(e.tolist()).degree()).values())) == 1 for _, e in graphs)


def test_tinhofer_w_ranks_within_stable_classes():
    n, e = 4, np.array([[0, 1], [0, 2], [0, 3]])      # a star: centre and three leaves
    w = tinhofer_w_ranks(n, e)
    assert w[0] == 0 and sorted(w[1:].tolist()) == [0, 1, 2]
    n, e = csl_graph(41, 5)                           # one WL class: W equals the full rank
    assert np.array_equal(tinhofer_w_ranks(n, e), tinhofer_ranks(n, e))


def test_bad_graphs_and_ranks_are_named():
    with pytest.raises(ValueError, match="shape"):
        check_graph(3, [0, 1, 2])
    with pytest.raises(ValueError, match="nodes 0..2"):
        check_graph(3, [[0, 3]])
    with pytest.raises(ValueError, match="self-loops"):
        check_graph(3, [[1, 1]])
    with pytest.raises(ValueError, match="twice"):
        check_graph(3, [[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="permutation"):
        sorted_adjacency(3, [[0, 1]], [0, 0, 1])
    with pytest.raises(ValueError, match="permutation"):
        relabel(3, [[0, 1]], [0, 1, 1])
    with pytest.raises(ValueError, match="choose"):
        tinhofer_ranks(3, [[0, 1]], choose="middle")


def test_individualisation_features():
    assert binary_code([0, 1, 5, 64], 6).tolist() == [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1],
                                                      [0, 0, 0, 1, 0, 1], [0, 0, 0, 0, 0, 0]]
    n, e = csl_graph(41, 3)
    rng = np.random.default_rng(0)
    assert individualize("none", n, e).shape == (41, 1)
    for scheme in ("rni", "rp", "tinhofer", "tinhofer_w"):
        x = individualize(scheme, n, e, rng)
        assert x.shape == (41, 7) and np.all(x[:, 0] == 1)
    rp = individualize("rp", n, e, rng)[:, 1:]
    codes = {tuple(r) for r in rp}
    assert len(codes) == 41                      # 41 distinct 6-bit identifiers
    with pytest.raises(ValueError, match="unknown"):
        individualize("random", n, e, rng)
    with pytest.raises(ValueError, match="rng"):
        individualize("rp", n, e)


def test_relabelled_copies():
    base = csl_graphs(17, (2, 3))
    graphs, labels = relabelled_copies(base, 3, np.random.default_rng(0))
    assert labels.tolist() == [0, 0, 0, 1, 1, 1] and len(graphs) == 6
    for (n, e), y in zip(graphs, labels):
        assert nx.is_isomorphic(nx.Graph(e.tolist()), nx.Graph(base[y][1].tolist()))
    with pytest.raises(ValueError, match="per_class"):
        relabelled_copies(base, 0, np.random.default_rng(0))


def test_tinhofer_without_refinement_follows_the_input_numbering():
    n, e = csl_graph(41, 4)
    assert tinhofer_ranks(n, e, refinement=False).tolist() == list(range(41))
    rng = np.random.default_rng(3)
    e2 = relabel(n, e, rng.permutation(n))
    assert not np.array_equal(sorted_adjacency(n, e2, tinhofer_ranks(n, e2, refinement=False)),
                              sorted_adjacency(n, e, tinhofer_ranks(n, e, refinement=False)))
