import numpy as np
import pytest

from reprobook import rng
from reprobook.data.digit_domains import DOMAINS, render_domains, texture


def _small():
    r = np.random.default_rng(0)
    return r.uniform(0, 16, (40, 64)), np.arange(40) % 10


def test_domains_are_disjoint_and_split():
    px, lb = _small()
    dd = render_domains(rng(0, 1), domains=DOMAINS, size=16, pixels=px, labels=lb)
    assert dd.x.shape == (40, 1, 16, 16) and dd.x.dtype == np.float32
    assert dd.x.min() >= 0 and dd.x.max() <= 1
    assert np.bincount(dd.domain).tolist() == [8] * 5
    sp = dd.lodo("texture")
    assert set(dd.domain[sp["test"]]) == {3}
    assert 3 not in set(dd.domain[sp["train"]]) and 3 not in set(dd.domain[sp["source_val"]])
    assert not set(sp["train"]) & set(sp["source_val"])


def test_style_differs_content_does_not():
    """The same digit rendered clean and inverted: intensities are an affine map (content kept)."""
    px, lb = _small()
    px = np.tile(px[:1], (40, 1))
    dd = render_domains(rng(0, 2), domains=("clean", "inverted"), pixels=px, labels=lb)
    a, b = dd.x[dd.domain == 0][0].ravel(), dd.x[dd.domain == 1][0].ravel()
    assert np.allclose(b, 0.8 - 0.6 * a, atol=1e-6)


def test_texture_is_real_photo():
    t = texture("brick")
    assert t.ndim == 2 and t.min() == 0 and t.max() == 1 and t.std() > 0.05


def test_bad_input():
    px, lb = _small()
    with pytest.raises(ValueError, match="unknown domain"):
        render_domains(rng(0, 1), domains=("clean", "sketch"), pixels=px, labels=lb)
    with pytest.raises(ValueError, match="n_per_domain"):
        render_domains(rng(0, 1), n_per_domain=100, pixels=px, labels=lb)
    dd = render_domains(rng(0, 1), domains=("clean", "noise"), pixels=px, labels=lb)
    with pytest.raises(ValueError, match="held_out"):
        dd.lodo("texture")
