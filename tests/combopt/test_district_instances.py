import networkx as nx
import numpy as np
import pytest

from reprobook.combopt.district_instances import N_BU_FEATURES, bu_features, make_instance


@pytest.mark.parametrize("rows,cols", [(3, 3), (4, 5), (6, 6)])
def test_instance_is_connected_planar_and_seeded(rows, cols):
    inst = make_instance(rows, cols, np.random.default_rng(1))
    again = make_instance(rows, cols, np.random.default_rng(1))
    assert inst.n == rows * cols
    g = inst.graph()
    assert nx.is_connected(g)
    assert nx.check_planarity(g)[0]
    assert np.array_equal(inst.edges, again.edges) and np.allclose(inst.density, again.density)
    assert np.all(inst.areas > 0) and np.all(inst.density > 0)
    assert np.all(inst.edges[:, 0] < inst.edges[:, 1])
    x = bu_features(inst)
    assert x.shape == (inst.n, N_BU_FEATURES) and np.all(np.isfinite(x))


def test_some_edges_are_dropped():
    full = make_instance(5, 5, np.random.default_rng(0), drop_frac=0.0)
    cut = make_instance(5, 5, np.random.default_rng(0), drop_frac=0.2)
    assert len(cut.edges) < len(full.edges)


@pytest.mark.parametrize("kwargs,name", [
    (dict(rows=0, cols=3), "rows"), (dict(rows=3, cols=-1), "cols"),
    (dict(rows=3, cols=3, lo=4, hi=3), "lo"), (dict(rows=3, cols=3, drop_frac=1.5), "drop_frac"),
    (dict(rows=1, cols=2, lo=3, hi=5), "rows * cols")])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name.replace("*", r"\*")):
        make_instance(rng=np.random.default_rng(0), **kwargs)
