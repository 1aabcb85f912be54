import numpy as np
import pytest

from reprobook.data.cluttered_digits import class_corner, cluttered_digits, split_digits
from reprobook.data.digits import load_digits_arrays


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits_arrays()
    return x[:200], y[:200]


def test_shapes_ranges_and_saliency_densities(digits):
    d = cluttered_digits(np.random.default_rng(0), *digits, size=16, scale=1, cue_size=2)
    assert d.x.shape == d.saliency.shape == (200, 16, 16)
    assert d.x.min() >= 0 and d.x.max() <= 1
    np.testing.assert_allclose(d.saliency.sum(axis=(1, 2)), 1.0, atol=1e-5)
    assert (d.saliency >= 0).all()


def test_cue_modes(digits):
    g = np.random.default_rng(1)
    linked = cluttered_digits(g, *digits, size=16, scale=1, cue_p=1.0)
    np.testing.assert_array_equal(linked.cue_corner, class_corner(linked.y))
    shifted = cluttered_digits(g, *digits, size=16, scale=1, cue="shifted")
    assert (shifted.cue_corner != class_corner(shifted.y)).all() and (shifted.cue_corner >= 0).all()
    none = cluttered_digits(g, *digits, size=16, scale=1, cue="none")
    assert (none.cue_corner == -1).all()
    # the cue is painted white in its corner and carries little saliency mass
    i = 0
    c = linked.cue_corner[i]
    r = slice(0, 3) if c in (0, 1) else slice(13, 16)
    s = slice(0, 3) if c in (0, 2) else slice(13, 16)
    assert (linked.x[i][r, s] == 1.0).all()


def test_saliency_sits_on_the_digit(digits):
    d = cluttered_digits(np.random.default_rng(2), *digits, size=24, scale=2, cue="none")
    for i in range(20):
        r, c = d.position[i]
        inside = d.saliency[i][r:r + 16, c:c + 16].sum()
        assert inside > 0.9


def test_same_seed_same_canvases_and_shifted_keeps_backgrounds(digits):
    a = cluttered_digits(np.random.default_rng(3), *digits, size=16, scale=1)
    b = cluttered_digits(np.random.default_rng(3), *digits, size=16, scale=1)
    np.testing.assert_array_equal(a.x, b.x)
    s = cluttered_digits(np.random.default_rng(3), *digits, size=16, scale=1, cue="shifted")
    np.testing.assert_array_equal(a.position, s.position)
    np.testing.assert_array_equal(a.saliency, s.saliency)


def test_split_is_disjoint_and_stratified():
    y = np.repeat(np.arange(4), 20)
    tr, te, po = split_digits(y, np.random.default_rng(0), test=0.3, pool=0.2)
    assert len(set(tr) | set(te) | set(po)) == 80
    assert not (set(tr) & set(te)) and not (set(tr) & set(po)) and not (set(te) & set(po))
    for k in range(4):
        assert (y[te] == k).sum() == 6 and (y[po] == k).sum() == 4


def test_bad_input_is_named(digits):
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="cue mode"):
        cluttered_digits(g, *digits, cue="left")
    with pytest.raises(ValueError, match="cannot hold"):
        cluttered_digits(g, *digits, size=12, scale=2)
    with pytest.raises(ValueError, match="photos"):
        cluttered_digits(g, *digits, photos=("moon-landing",))
    with pytest.raises(ValueError, match="test"):
        split_digits(np.zeros(10), g, test=0.0)
